#!/usr/bin/env bash
# Installs what `cargo test --workspace` needs beside a Rust toolchain, on a fresh Debian
# or Ubuntu machine: the guest's target, Debian's `docker-registry` (a real OCI registry on
# loopback), Node.js with npm and the jco host's packages, and a Python venv with the
# official Python SDK for the interop peers. Only what is missing is installed; apt-get
# needs root (or sudo). Run from anywhere: paths are the repository's.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown

missing=()
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v python3 >/dev/null || missing+=(python3)
# Debian splits venv's pip bootstrap into python3-venv.
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo)
  echo "installing ${missing[*]} from the distribution's archive"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq "${missing[@]}"
fi

npm ci --prefix tests/jco-host --no-audit --no-fund
python3 -m venv .venv-peers
.venv-peers/bin/pip install --quiet 'agenthooksprotocol[http]==0.10.1' 'uvicorn==0.54.0'
