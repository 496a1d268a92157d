//! `ahp component push|export`, and where `--component` finds a component: a file, or
//! an `oci://` reference pulled from a registry, verified by digest and cached.

use crate::component_cache::ComponentCache;
use crate::oci;
use crate::runtime::{EMBEDDED_COMPONENT, EMBEDDED_WIT_PACKAGE};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// File names of `ahp component export`.
const COMPONENT_FILE: &str = "ahp_interceptor.wasm";
const WIT_PACKAGE_FILE: &str = "ahp_interceptor.wit.wasm";

/// Distribution of the component.
#[derive(clap::Subcommand)]
pub enum ComponentCommand {
    /// Push a component to an OCI registry (CNCF wasm artifact: config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer) and print its
    /// reference pinned by digest as JSON.
    Push {
        /// REGISTRY/REPOSITORY:TAG, with or without oci:// (plain http only to loopback).
        reference: String,
        /// The component to push (a path or oci://REF); default: the embedded one.
        #[arg(long)]
        component: Option<String>,
    },
    /// Write the embedded component (ahp_interceptor.wasm) and the WIT package it
    /// implements, ahp:interceptor@0.1.3 (ahp_interceptor.wit.wasm), into DIR.
    Export {
        /// The directory to write into (created if missing).
        dir: PathBuf,
    },
}

/// Runs one `ahp component` command.
pub async fn run(command: ComponentCommand) -> ExitCode {
    let result = match command {
        ComponentCommand::Push {
            reference,
            component,
        } => push(&reference, component.as_deref()).await,
        ComponentCommand::Export { dir } => export(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::cli::fail(&e),
    }
}

/// The component `--component SOURCE` names: `oci://REF[@sha256:…]` is pulled (verified
/// by digest, through the user's cache if there is one), anything else is read as a file.
/// Only a component binary: a core module, WebAssembly text or any other file is refused
/// naming it, rather than compiled (wasmtime would read text as WAT) or failing later with
/// a compiler's message that names neither the flag nor the file.
pub async fn load(source: &str) -> Result<Vec<u8>, String> {
    let bytes = if source.starts_with(oci::SCHEME) {
        // Named as `hook install` names it: `component push REF --component oci://…`
        // has two references that could be at fault.
        let reference = oci::parse_reference(source).map_err(|e| format!("--component: {e}"))?;
        oci::pull(&reference, ComponentCache::for_user().as_ref())
            .await
            .map_err(|e| format!("--component: {e}"))?
            .component
    } else {
        read_bounded(source)?
    };
    a_component(source, bytes)
}

/// `bytes` (from `--component SOURCE`) if they begin as a component binary does, else
/// the error naming the flag and the source.
pub(crate) fn a_component(source: &str, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    match is_component(&bytes) {
        true => Ok(bytes),
        false => Err(format!(
            "--component {source}: not a WebAssembly component (no component binary header)"
        )),
    }
}

/// Whether `bytes` begin as a component binary does: the wasm magic, a version, then the
/// component layer (1; a core module's is 0).
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

/// A component file, read no further than a pulled one may be
/// ([`oci::MAX_COMPONENT_BYTES`]), and only a regular file ([`crate::regular_file`]).
fn read_bounded(source: &str) -> Result<Vec<u8>, String> {
    crate::regular_file::read(Path::new(source), oci::MAX_COMPONENT_BYTES)
        .map_err(|e| format!("read component {source}: {e}"))
}

async fn push(reference: &str, component: Option<&str>) -> Result<(), String> {
    // Named, as `--component`'s are: both may be references, either could be at fault.
    let reference = oci::parse_reference(reference).map_err(|e| format!("REFERENCE: {e}"))?;
    let bytes = match component {
        Some(source) => load(source).await?,
        None => EMBEDDED_COMPONENT.to_vec(),
    };
    let pushed = oci::push(&reference, bytes).await?;
    crate::cli::print_line(serde_json::json!({
        "reference": format!("{}{}", oci::SCHEME, pushed.pinned),
        "manifestDigest": pushed.manifest_digest,
        "componentDigest": pushed.component_digest,
    }))
}

/// Writes `bytes` to `path` in `dir` through a new file renamed over it: whatever is at
/// `path` is replaced, never written through (a symbolic link another user left in a
/// shared directory would have its target overwritten). Readable as a file
/// `std::fs::write` creates is (0666 less the umask).
fn write_replacing(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let mut file = tempfile::Builder::new()
        .prefix(".ahp-export")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn export(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    for (name, bytes) in [
        (COMPONENT_FILE, EMBEDDED_COMPONENT),
        (WIT_PACKAGE_FILE, EMBEDDED_WIT_PACKAGE),
    ] {
        let path = dir.join(name);
        write_replacing(dir, &path, bytes).map_err(|e| format!("write {}: {e}", path.display()))?;
        crate::cli::print_line(path.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Export writes both files, and replaces what is at their names rather than writing
    /// through it: a symbolic link planted there keeps its target as it was.
    #[test]
    fn export_replaces_a_link_at_its_files_names() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("someone's file");
        std::fs::write(&target, b"keep me").unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&target, out.join(COMPONENT_FILE)).unwrap();
        export(&out).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        let written = std::fs::symlink_metadata(out.join(COMPONENT_FILE)).unwrap();
        assert!(written.is_file());
        assert_eq!(
            std::fs::read(out.join(COMPONENT_FILE)).unwrap(),
            EMBEDDED_COMPONENT
        );
        let wit = std::fs::read(out.join(WIT_PACKAGE_FILE)).unwrap();
        assert_eq!(wit, EMBEDDED_WIT_PACKAGE);
    }
}
