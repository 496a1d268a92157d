//! The component describes itself (issue 13): registry metadata embedded in the format
//! registries read (`wasm-metadata`), imports reduced to what it uses, and its contract
//! published beside it as the binary WIT package `ahp:interceptor@0.1.3`.

use ahp_host::{EMBEDDED_COMPONENT, EMBEDDED_WIT_PACKAGE};
use wit_component::DecodedWasm;

#[test]
fn the_component_carries_name_version_licence_source_homepage_and_revision() {
    let payload = wasm_metadata::Payload::from_binary(EMBEDDED_COMPONENT).expect("a component");
    let m = payload.metadata();
    let text = |field: Option<String>| field.unwrap_or_else(|| "(missing)".into());
    assert_eq!(m.name.as_deref(), Some("ahp-interceptor"));
    assert_eq!(
        text(m.version.as_ref().map(|v| v.to_string())),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        text(m.licenses.as_ref().map(|v| v.to_string())),
        "Apache-2.0"
    );
    assert_eq!(
        text(m.source.as_ref().map(|v| v.to_string())),
        env!("CARGO_PKG_REPOSITORY")
    );
    assert_eq!(
        text(m.homepage.as_ref().map(|v| v.to_string())),
        env!("CARGO_PKG_HOMEPAGE")
    );
    assert_eq!(
        text(m.description.as_ref().map(|v| v.to_string())),
        "Agent Hooks Protocol interception logic, built as a WebAssembly component"
    );
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let revision = m.revision.as_ref().map(|v| v.to_string());
    match head {
        Some(head) => assert_eq!(
            revision.as_deref(),
            Some(head.as_str()),
            "the commit the component was built from"
        ),
        // Outside a checkout: `AHP_REVISION`, else "unknown", never none.
        None => assert!(revision.is_some_and(|r| !r.is_empty()), "a revision"),
    }
}

#[test]
fn the_component_imports_only_the_clock_and_the_ahp_interfaces() {
    let DecodedWasm::Component(resolve, world) =
        wit_component::decode(EMBEDDED_COMPONENT).expect("decode the component")
    else {
        panic!("the embedded binary is a component");
    };
    let world = &resolve.worlds[world];
    let names = |items: Vec<&wit_parser::WorldKey>| -> Vec<String> {
        let mut names: Vec<String> = items
            .into_iter()
            .map(|k| resolve.name_world_key(k))
            .collect();
        names.sort();
        names
    };
    let imports = names(world.imports.keys().collect());
    let unversioned: Vec<&str> = imports
        .iter()
        .map(|name| name.split('@').next().unwrap_or(name))
        .collect();
    assert_eq!(unversioned, IMPORTS, "imports: {imports:?}");
    assert_eq!(
        names(world.exports.keys().collect()),
        ["ahp:interceptor/interceptor@0.1.3"]
    );
}

/// Everything a host must supply (README, "Hosting the component elsewhere").
const IMPORTS: [&str; 4] = [
    "ahp:interceptor/credentials",
    "ahp:interceptor/delivery",
    "ahp:interceptor/host-types",
    "wasi:clocks/monotonic-clock",
];

#[test]
fn the_contract_is_published_as_its_wit_package() {
    let DecodedWasm::WitPackage(resolve, package) =
        wit_component::decode(EMBEDDED_WIT_PACKAGE).expect("decode the WIT package")
    else {
        panic!("the embedded WIT binary is a WIT package");
    };
    let package = &resolve.packages[package];
    assert_eq!(package.name.to_string(), "ahp:interceptor@0.1.3");
    assert!(package.worlds.contains_key("plugin"), "world plugin");
    let mut interfaces: Vec<&str> = package.interfaces.keys().map(String::as_str).collect();
    interfaces.sort();
    assert_eq!(
        interfaces,
        ["credentials", "delivery", "host-types", "interceptor"]
    );
}
