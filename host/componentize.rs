//! From a core WebAssembly module to a self-describing component, at build time.
//!
//! The guest is compiled for `wasm32-unknown-unknown`, so its core module imports only
//! what its code calls: the `ahp:interceptor` interfaces and `wasi:clocks/monotonic-clock`
//! (through the `wasi` crate). Rust's standard library for `wasm32-wasip2` would add
//! `wasi:cli` (environment, stdin/stdout/stderr, exit, terminal-*), `wasi:io` and
//! `wasi:filesystem` imports that a third-party host would have to supply for nothing.
//! `wit-component` turns the module into a component from the WIT that `wit-bindgen`
//! embedded in it, and `wasm-metadata` writes the registry metadata (name, version,
//! description, licence, source, homepage, revision) into it.
//!
//! Everything here is deterministic: the same module and metadata give the same bytes.

use std::path::Path;
use wasm_metadata::{
    AddMetadata, AddMetadataField, Description, Homepage, Licenses, Revision, Source, Version,
};

/// What a registry shows about the component (the OCI annotations' vocabulary).
pub struct Metadata {
    pub name: String,
    pub version: String,
    pub description: String,
    /// An SPDX licence expression.
    pub license: String,
    /// URL of the source repository.
    pub source: String,
    pub homepage: String,
    /// The source revision (a commit id) or `unknown`.
    pub revision: String,
}

/// Encodes `module` (a core module carrying `wit-bindgen`'s component-type sections) as a
/// component and embeds `metadata` in it.
pub fn componentize(module: &[u8], metadata: &Metadata) -> Result<Vec<u8>, String> {
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(module)
        .map_err(|e| format!("read the core module: {e:#}"))?
        .encode()
        .map_err(|e| format!("encode the component: {e:#}"))?;
    let mut add = AddMetadata::default();
    add.name = AddMetadataField::Set(metadata.name.clone());
    add.version = AddMetadataField::Set(Version::new(metadata.version.clone()));
    add.description = AddMetadataField::Set(Description::new(metadata.description.clone()));
    add.licenses = AddMetadataField::Set(
        Licenses::new(&metadata.license).map_err(|e| format!("licence: {e:#}"))?,
    );
    add.source = AddMetadataField::Set(
        Source::new(&metadata.source).map_err(|e| format!("source URL: {e:#}"))?,
    );
    add.homepage = AddMetadataField::Set(
        Homepage::new(&metadata.homepage).map_err(|e| format!("homepage URL: {e:#}"))?,
    );
    add.revision = AddMetadataField::Set(Revision::new(metadata.revision.clone()));
    add.to_wasm(&component)
        .map_err(|e| format!("add metadata: {e:#}"))
}

/// Encodes the WIT package in `wit_dir` (here `ahp:interceptor@0.1.3`) as a binary WIT
/// package, the form registries and `wkg` exchange contracts in.
pub fn encode_wit_package(wit_dir: &Path) -> Result<Vec<u8>, String> {
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_dir(wit_dir)
        .map_err(|e| format!("parse {}: {e:#}", wit_dir.display()))?;
    // Plain (not canonicalized) interface names: what every decoder, older ones included,
    // reads.
    wit_component::encode(&resolve, package, false)
        .map_err(|e| format!("encode the WIT package: {e:#}"))
}
