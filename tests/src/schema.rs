//! The carried upstream JSON Schemas (`tests/upstream/schema/draft`, Apache-2.0, see
//! `tests/upstream/NOTICE`) as validators, so what this project emits is checked against
//! the protocol's own text. A `$ref` to another schema is resolved from the carried files
//! alone, by its file name: never the network, never a path outside the repository.

use jsonschema::{Retrieve, Uri, Validator};
use serde_json::Value;
use std::path::PathBuf;

/// Where the carried schemas are.
fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("upstream/schema/draft")
}

/// The carried schema file `name`, as JSON.
fn read(name: &str) -> Result<Value, String> {
    let path = dir().join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Resolves `https://agenthooksprotocol.org/schemas/draft/NAME` to the carried `NAME`.
struct Carried;

impl Retrieve for Carried {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let name = uri.as_str().rsplit('/').next().unwrap_or_default();
        Ok(read(name)?)
    }
}

/// A validator for the carried schema `name` (e.g. `capabilities-response.schema.json`).
pub fn validator(name: &str) -> Validator {
    let schema = read(name).expect("a carried schema");
    jsonschema::options()
        .with_retriever(Carried)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{name} does not build: {e}"))
}

/// Asserts `instance` is valid against the carried schema `name`, listing every error.
pub fn assert_valid(name: &str, instance: &Value) {
    let validator = validator(name);
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not valid against {name}: {errors:#?}\n{instance:#}"
    );
}
