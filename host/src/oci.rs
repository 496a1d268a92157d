//! The component as a CNCF wasm OCI artifact: push it to a registry, and pull it back
//! verified by digest.
//!
//! Layout (the CNCF TAG Runtime "Wasm OCI Artifact" format, its config built by
//! `oci-wasm`): an OCI image manifest whose config is `application/vnd.wasm.config.v0+json`
//! (the component's imports and exports) and whose one layer is the component,
//! `application/wasm`. The manifest's annotations repeat the metadata embedded in the
//! component (title, version, description, licences, source, revision, url), which is what
//! registries display.
//!
//! Trust: a reference pinned with `@sha256:…` names the exact manifest, and the manifest
//! names the exact layer by its digest. This module checks both on every pull, from the
//! registry or from the cache, before a byte of the component can run; a mismatch is an
//! error, never a fallback. An unpinned reference (a tag) is fetched from the registry
//! every time, since tags move; only its layer may come from the cache.
//!
//! Transport: plain `http` only to a loopback registry (`localhost`, pinned to 127.0.0.1
//! and ::1 rather than looked up; `127.0.0.0/8`; and
//! `[::1]` where a redirect or a token service names it: a reference cannot, the OCI
//! reference grammar has no bracketed host), which is spoken to over plain http; every
//! other registry over `https`,
//! verified by rustls (ring) against the platform's roots; no proxy from the environment
//! for a loopback registry. Credentials, if any, come from `AHP_REGISTRY_USERNAME` /
//! `AHP_REGISTRY_PASSWORD`, go only to the registry `AHP_REGISTRY_HOST` names (or the
//! token service its `Bearer` challenge names; the names compared as the registries they
//! reach, [`registry_origin`]), and are never printed; a 401 from a registry they were
//! withheld from says so. A pull and a push
//! both speak to the registry through [`crate::registry`], which sends a push's blobs only
//! to upload locations on the registry's own origin.

use crate::component_cache::{sha256_digest, sha256_hex, ComponentCache};
use crate::registry::{Access, Failed, Registry, MAX_MANIFEST_BYTES};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
pub(crate) use oci_client::Reference;
use oci_wasm::{
    ToConfig as _, WasmConfig, WASM_LAYER_MEDIA_TYPE, WASM_MANIFEST_CONFIG_MEDIA_TYPE,
    WASM_MANIFEST_MEDIA_TYPE,
};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

/// How `--component` names a component in a registry.
pub const SCHEME: &str = "oci://";

/// The largest component a pull accepts (the real one is about 300 KB).
pub(crate) const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// The longest a pull may take, manifest and component together. The client's read
/// timeout bounds each read, not the pull: a registry that trickles a byte now and then
/// would hold it for ever. `ahp hook` pulls inside its budget, which ends it sooner;
/// `ahp intercept`, `check`, `observe`, `demo` and `precompile` load the component before
/// any hook call (and its budget) begins, like compiling it, so this is their bound.
const PULL_DEADLINE: Duration = Duration::from_secs(60);

/// The longest a push may take, upload and read-back together: for the same reason as
/// [`PULL_DEADLINE`], longer since it uploads.
const PUSH_DEADLINE: Duration = Duration::from_secs(300);

/// What a push stored.
pub struct Pushed {
    /// The reference pinned to the manifest: `REGISTRY/REPO:TAG@sha256:…`.
    pub pinned: String,
    /// Digest of the manifest (what `@sha256:…` in a reference names).
    pub manifest_digest: String,
    /// Digest of the component itself (the layer).
    pub component_digest: String,
}

/// Parses `REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`, with or without `oci://` in front.
pub fn parse_reference(text: &str) -> Result<Reference, String> {
    let bare = text.strip_prefix(SCHEME).unwrap_or(text);
    // A reference's only `@` begins its digest. Any other may be `user:password@`, so the
    // text is not repeated.
    if bare
        .split_once('@')
        .is_some_and(|(_, digest)| sha256_hex(digest).is_none())
    {
        return Err(
            "invalid OCI reference (not shown: it may hold a password): an `@` may \
             only begin the digest, sha256: and 64 lowercase hex digits; registry credentials \
             come from AHP_REGISTRY_USERNAME and AHP_REGISTRY_PASSWORD"
                .into(),
        );
    }
    // oci-spec's rule: the first component is the registry only if it looks like a host;
    // otherwise the reference means Docker Hub, which must be named like any other.
    let registry = bare.split_once('/').map(|(first, _)| first);
    if !registry.is_some_and(|r| r.contains('.') || r.contains(':') || r == "localhost") {
        return Err(format!(
            "invalid OCI reference {text:?}: name the registry (a host with a `.` or a port, \
             or localhost), e.g. 127.0.0.1:5000/ahp/interceptor:0.1.0"
        ));
    }
    // The tag is checked here, not left to oci-spec, whose pattern takes any Unicode
    // letter or digit and whose error does not say what is wrong.
    let name = bare.split_once('@').map_or(bare, |(name, _)| name);
    let last = name.rsplit_once('/').map_or(name, |(_, last)| last);
    if let Some((_, tag)) = last.split_once(':').filter(|(_, tag)| !is_oci_tag(tag)) {
        return Err(format!(
            "invalid OCI reference {text:?}: the tag {tag:?} is not an OCI tag (1 to 128 ASCII \
             letters, digits, `_`, `.` and `-`, the first not `.` or `-`)"
        ));
    }
    bare.parse()
        .map_err(|e| format!("invalid OCI reference {text:?}: {e}"))
}

/// The OCI distribution spec's tag, `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`, in ASCII: the
/// pattern oci-spec checks with (`\w`) takes any Unicode letter or digit, which a
/// registry refuses, or takes as some other tag.
fn is_oci_tag(tag: &str) -> bool {
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    match tag.as_bytes() {
        [first, rest @ ..] => {
            word(first) && rest.len() < 128 && rest.iter().all(|b| word(b) || b".-".contains(b))
        }
        [] => false,
    }
}

/// Pushes `component` to `reference` (which must name a tag, not a digest).
pub async fn push(reference: &Reference, component: Vec<u8>) -> Result<Pushed, String> {
    let doing = format!("push to {}", reference.whole());
    within(PUSH_DEADLINE, &doing, store(reference, component)).await
}

/// [`push`] without a deadline.
async fn store(reference: &Reference, component: Vec<u8>) -> Result<Pushed, String> {
    store_with(reference, component, &auth(reference)?).await
}

/// [`store`] with `auth` (the tests' own, whatever the environment holds).
async fn store_with(
    reference: &Reference,
    component: Vec<u8>,
    auth: &Auth,
) -> Result<Pushed, String> {
    if reference.digest().is_some() {
        return Err(format!(
            "push to a tag, not a digest: {}",
            reference.whole()
        ));
    }
    let whole = reference.whole();
    require_component(&component).map_err(|e| format!("push to {whole}: {e}"))?;
    let annotations = annotations(&component)?;
    let component_digest = sha256_digest(&component);
    let (mut config, layer) = WasmConfig::from_raw_component(component, None)
        .map_err(|e| format!("not a WebAssembly component: {e:#}"))?;
    // A fixed creation time: pushing the same component gives the same manifest digest.
    config.created = chrono::DateTime::UNIX_EPOCH;
    let config = config
        .to_config()
        .map_err(|e| format!("the component's OCI config: {e:#}"))?;
    let mut manifest =
        OciImageManifest::build(std::slice::from_ref(&layer), &config, Some(annotations));
    manifest.media_type = Some(WASM_MANIFEST_MEDIA_TYPE.to_string());
    let config_digest = manifest.config.digest.clone();
    let manifest = serde_json::to_vec(&manifest).map_err(|e| format!("the OCI manifest: {e}"))?;
    // A pull reads no more than MAX_MANIFEST_BYTES of a manifest, and the annotations copy
    // the component's metadata, of any size: a larger manifest would be stored, the tag
    // moved to it, and no pull could read it. Refused before the registry is asked.
    if manifest.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!(
            "push to {whole}: the OCI manifest is {} bytes, more than the {MAX_MANIFEST_BYTES} \
             a pull reads (its annotations copy the component's metadata: shorten the \
             description or other fields); nothing was sent",
            manifest.len()
        ));
    }
    let manifest_digest = sha256_digest(&manifest);
    let tag = reference.tag().unwrap_or("latest");
    // Each error names its step: which one a registry refused says what to fix.
    let step = |what: &'static str| move |e: Failed| e.context(what);
    let upload = async {
        let registry = Registry::open(reference, &auth.credential, Access::Push).await?;
        let blob = registry.push_blob(&component_digest, layer.data).await;
        blob.map_err(step("upload the component blob"))?;
        let blob = registry.push_blob(&config_digest, config.data).await;
        blob.map_err(step("upload the config blob"))?;
        registry
            .push_manifest(tag, WASM_MANIFEST_MEDIA_TYPE, manifest)
            .await
            .map_err(step("upload the manifest"))
    };
    upload
        .await
        .map_err(|e| format!("push to {whole}: {}", auth.explain(e)))?;
    // The manifest is read back by its digest, with a token of its own (the push's may
    // have run out during the upload): what the printed reference pins is stored. The
    // tag has moved by now, so a failure here says so: the push is not undone.
    let pinned = parse_reference(&format!("{whole}@{manifest_digest}"))?;
    let read_back = async {
        let registry = Registry::open(&pinned, &auth.credential, Access::Pull).await?;
        registry.manifest(&manifest_digest).await
    };
    let failed = |e: Failed| {
        format!(
            "read back the manifest of {}: {} (the upload was taken: the tag {tag} already \
             names this manifest)",
            pinned.whole(),
            auth.explain(e)
        )
    };
    let stored = read_back.await.map_err(failed)?;
    if sha256_digest(&stored) != manifest_digest {
        return Err(failed(Failed::lasting(
            "the registry's answer is other bytes",
        )));
    }
    Ok(Pushed {
        pinned: format!("{whole}@{manifest_digest}"),
        manifest_digest,
        component_digest,
    })
}

/// Why a pull failed.
#[derive(Debug, PartialEq, Eq)]
pub enum PullError {
    /// The registry could not give the component now — not reached, not answering in
    /// time, or answering with an error: it may later.
    Unavailable(String),
    /// What the registry or the cache gave failed a check (a digest mismatch, a manifest
    /// that is no wasm component's, an answer longer than its bound), this client's rules
    /// refuse the registry's answers (a token service or a redirect over plain http, a
    /// challenge or token it cannot use, a certificate that does not verify), or the
    /// credentials are wrong (a bad `AHP_REGISTRY_*` environment; a 401 or 403 from the
    /// registry or its token service): asking again later gives no other answer.
    Refused(String),
}

impl PullError {
    /// What the registry's `failed` makes of the step `doing`: refused where asking
    /// again gets the same answer (`failed.lasting`), else unavailable.
    fn of(failed: Failed, doing: String) -> PullError {
        let message = format!("{doing}: {failed}");
        match failed.lasting {
            true => PullError::Refused(message),
            false => PullError::Unavailable(message),
        }
    }
}

impl std::fmt::Display for PullError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullError::Unavailable(e) | PullError::Refused(e) => f.write_str(e),
        }
    }
}

/// What a pull got.
#[derive(Debug, PartialEq, Eq)]
pub struct Pulled {
    /// The component, verified against the manifest.
    pub component: Vec<u8>,
    /// The digest of the manifest it came by: what a tag names now, to pin it to.
    pub manifest_digest: String,
}

/// Pulls the component `reference` names, verified by digest, through `cache` if there is
/// one, within [`PULL_DEADLINE`].
pub async fn pull(
    reference: &Reference,
    cache: Option<&ComponentCache>,
) -> Result<Pulled, PullError> {
    let doing = format!("pull {}", reference.whole());
    tokio::time::timeout(PULL_DEADLINE, fetch(reference, cache))
        .await
        .unwrap_or_else(|_| Err(PullError::Unavailable(late(&doing, PULL_DEADLINE))))
}

/// `work` (`doing`, for the error) ended by `deadline` if it has not ended by then.
async fn within<T>(
    deadline: Duration,
    doing: &str,
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| Err(late(doing, deadline)))
}

/// What [`within`] says of `doing` not done by `deadline`.
fn late(doing: &str, deadline: Duration) -> String {
    format!("{doing}: not done within {deadline:?} (the registry is slow or not answering)")
}

/// [`pull`] without a deadline. The registry is asked only for what the cache does not
/// hold: a pinned reference whose manifest and layer are cached needs no network.
async fn fetch(reference: &Reference, cache: Option<&ComponentCache>) -> Result<Pulled, PullError> {
    let auth = auth(reference).map_err(PullError::Refused)?;
    fetch_with(reference, cache, &auth).await
}

/// [`fetch`] with `auth` (the tests' own, whatever the environment holds).
async fn fetch_with(
    reference: &Reference,
    cache: Option<&ComponentCache>,
    auth: &Auth,
) -> Result<Pulled, PullError> {
    let whole = reference.whole();
    let mut registry = None;
    let manifest_bytes = manifest_with(reference, cache, auth, &mut registry).await?;
    let layer = component_layer(&manifest_bytes)
        .map_err(|e| PullError::Refused(format!("{whole}: {e}")))?;
    let pulled = |component| Pulled {
        component,
        manifest_digest: sha256_digest(&manifest_bytes),
    };
    // component_layer checked that the size is 0 to MAX_COMPONENT_BYTES.
    let said = layer.size as u64;
    let bytes = match cache.and_then(|cache| cache.get(&layer.digest, said)) {
        Some(bytes) => bytes,
        None => {
            let registry = match registry {
                Some(registry) => registry,
                None => open(reference, auth, "the component").await?,
            };
            let bytes = registry.blob(&layer.digest, said).await.map_err(|e| {
                PullError::of(auth.explain(e), format!("pull the component of {whole}"))
            })?;
            let actual = sha256_digest(&bytes);
            if actual != layer.digest {
                return Err(PullError::Refused(format!(
                    "digest mismatch for the component of {whole}: expected {}, got {actual}",
                    layer.digest
                )));
            }
            keep(cache, &bytes);
            bytes
        }
    };
    // A blob longer than said was cut off at its size; one shorter is content that does
    // not match its descriptor, not to be trusted (OCI image-spec, descriptor `size`),
    // from the registry or the cache alike.
    if bytes.len() as u64 != said {
        return Err(PullError::Refused(format!(
            "the component of {whole} is {} bytes, its manifest says {said}",
            bytes.len()
        )));
    }
    Ok(pulled(bytes))
}

/// Whether `manifest` is an image index or a Docker manifest list (which the manifest
/// request accepts, to refuse it by name): its media type says so, or it lists
/// `manifests`.
fn is_index(manifest: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Kind {
        media_type: Option<String>,
        manifests: Option<serde::de::IgnoredAny>,
    }
    const INDEX_TYPES: [&str; 2] = [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ];
    serde_json::from_slice::<Kind>(manifest).is_ok_and(|kind| {
        kind.manifests.is_some()
            || kind
                .media_type
                .is_some_and(|t| INDEX_TYPES.contains(&t.as_str()))
    })
}

/// The manifest `reference` names, verified against its digest if it pins one: from
/// `cache` when pinned and held there, else from the registry (opened into `registry`,
/// which the component's blob is then asked from), and then kept in `cache`.
async fn manifest_with(
    reference: &Reference,
    cache: Option<&ComponentCache>,
    auth: &Auth,
    registry: &mut Option<Registry>,
) -> Result<Vec<u8>, PullError> {
    let cached = cache
        .zip(reference.digest())
        .and_then(|(cache, digest)| cache.get(digest, MAX_MANIFEST_BYTES));
    // The cache checked that these bytes hash to the pinned digest.
    if let Some(bytes) = cached {
        return Ok(bytes);
    }
    let whole = reference.whole();
    let name = reference
        .digest()
        .unwrap_or_else(|| reference.tag().unwrap_or("latest"));
    let opened = registry.insert(open(reference, auth, "the manifest").await?);
    let bytes = opened
        .manifest(name)
        .await
        .map_err(|e| PullError::of(auth.explain(e), format!("pull the manifest of {whole}")))?;
    let manifest_digest = sha256_digest(&bytes);
    if reference
        .digest()
        .is_some_and(|pinned| manifest_digest != pinned)
    {
        return Err(PullError::Refused(format!(
            "digest mismatch for {whole}: the registry's manifest is {manifest_digest}"
        )));
    }
    // Only what was fetched is stored: a manifest read from the cache stays as it is.
    keep(cache, &bytes);
    Ok(bytes)
}

/// The registry of `reference`, opened to pull `what` ("the manifest", "the component"),
/// which an error names.
async fn open(reference: &Reference, auth: &Auth, what: &str) -> Result<Registry, PullError> {
    Registry::open(reference, &auth.credential, Access::Pull)
        .await
        .map_err(|e| {
            let doing = format!("pull {what} of {}", reference.whole());
            PullError::of(auth.explain(e), doing)
        })
}

/// Stores verified bytes in the cache if there is one and it can: no cache, or one that
/// cannot be written (a read-only home), costs the next process a pull, never this one
/// its component. Bytes already stored (a tag's manifest, fetched at every pull) are
/// left as they are: no rewrite, sync or prune per call.
fn keep(cache: Option<&ComponentCache>, bytes: &[u8]) {
    let Some(cache) = cache else { return };
    if cache
        .get(&sha256_digest(bytes), bytes.len() as u64)
        .is_some()
    {
        return;
    }
    if let Err(e) = cache.put(bytes) {
        tracing::debug!(error = %e, "could not cache a pulled blob; continuing uncached");
    }
}

/// The one `application/wasm` layer of a wasm artifact manifest.
fn component_layer(manifest: &[u8]) -> Result<oci_client::manifest::OciDescriptor, String> {
    if is_index(manifest) {
        return Err(
            "an image index (a list of manifests), not a wasm artifact's manifest: \
                    name the wasm manifest's own digest"
                .into(),
        );
    }
    let manifest: OciImageManifest =
        serde_json::from_slice(manifest).map_err(|e| format!("not an OCI image manifest: {e}"))?;
    if manifest.config.media_type != WASM_MANIFEST_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "not a wasm artifact: config media type {:?}, expected {WASM_MANIFEST_CONFIG_MEDIA_TYPE}",
            manifest.config.media_type
        ));
    }
    let [layer] = <[_; 1]>::try_from(manifest.layers).map_err(|layers: Vec<_>| {
        format!(
            "a wasm artifact has exactly one layer, this one has {}",
            layers.len()
        )
    })?;
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(format!(
            "layer media type {:?}, expected {WASM_LAYER_MEDIA_TYPE}",
            layer.media_type
        ));
    }
    if sha256_hex(&layer.digest).is_none() {
        return Err(format!("layer digest {:?} is not sha256", layer.digest));
    }
    if !(0..=MAX_COMPONENT_BYTES as i64).contains(&layer.size) {
        return Err(format!("layer size {} is out of range", layer.size));
    }
    // `urls` name other places to download the layer from: any host, over plain http
    // too, past this module's transport rule.
    if layer.urls.is_some() {
        return Err("the layer has `urls`: a component comes only from its registry".into());
    }
    Ok(layer)
}

/// Refuses anything but a component. A WIT package (what `ahp component export` writes
/// beside the component) is encoded as a component binary too, and oci-wasm would publish
/// it, its interfaces listed as exports, for no one to run.
fn require_component(bytes: &[u8]) -> Result<(), String> {
    use wit_parser::decoding::{decode, DecodedWasm};
    match decode(bytes) {
        Ok(DecodedWasm::Component(..)) => Ok(()),
        Ok(DecodedWasm::WitPackage(resolve, package)) => Err(format!(
            "{} is a WIT package, not a WebAssembly component: push a component that \
             implements it",
            resolve.packages[package].name
        )),
        Err(e) => Err(format!("not a WebAssembly component: {e:#}")),
    }
}

/// The OCI manifest annotations for the metadata embedded in `component`.
fn annotations(component: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let payload = wasm_metadata::Payload::from_binary(component)
        .map_err(|e| format!("not a WebAssembly binary: {e:#}"))?;
    let m = payload.metadata();
    let fields = [
        ("org.opencontainers.image.title", m.name.clone()),
        (
            "org.opencontainers.image.version",
            m.version.as_ref().map(|v| v.to_string()),
        ),
        (
            "org.opencontainers.image.description",
            m.description.as_ref().map(|v| v.to_string()),
        ),
        (
            "org.opencontainers.image.licenses",
            m.licenses.as_ref().map(|v| v.to_string()),
        ),
        (
            "org.opencontainers.image.source",
            m.source.as_ref().map(|v| v.to_string()),
        ),
        (
            "org.opencontainers.image.revision",
            m.revision.as_ref().map(|v| v.to_string()),
        ),
        (
            "org.opencontainers.image.url",
            m.homepage.as_ref().map(|v| v.to_string()),
        ),
    ];
    Ok(fields
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect())
}

const USERNAME: &str = "AHP_REGISTRY_USERNAME";
const PASSWORD: &str = "AHP_REGISTRY_PASSWORD";
/// The registry (`host[:port]`) the credentials are for, and the only one they go to.
const HOST: &str = "AHP_REGISTRY_HOST";

/// What a pull or a push sends the registry, and why not the credentials configured if
/// they are for another registry: a 401 then says so, where the user would otherwise see
/// only the 401 and no reason for it.
#[derive(Debug, PartialEq, Eq)]
struct Auth {
    credential: RegistryAuth,
    /// "AHP_REGISTRY_HOST names another registry than this one, Y: sent without
    /// credentials". Not the value it names, which may be a secret set there by mistake.
    withheld: Option<String>,
}

impl Auth {
    /// `credential`, with nothing withheld.
    fn sending(credential: RegistryAuth) -> Auth {
        Auth {
            credential,
            withheld: None,
        }
    }

    /// `failed`, saying why no credentials were sent if it is a 401 and some were withheld.
    fn explain(&self, failed: Failed) -> Failed {
        match &self.withheld {
            Some(why) if failed.unauthorized => Failed {
                message: format!("{} ({why})", failed.message),
                ..failed
            },
            _ => failed,
        }
    }
}

/// The credentials for `reference`'s registry: HTTP Basic from [`USERNAME`] and
/// [`PASSWORD`] when [`HOST`] names that registry, anonymous access otherwise.
fn auth(reference: &Reference) -> Result<Auth, String> {
    auth_from(
        reference.registry(),
        std::env::var_os(USERNAME),
        std::env::var_os(PASSWORD),
        std::env::var_os(HOST),
    )
}

/// Both or neither, and bound to the one registry [`HOST`] names: one alone is a mistake
/// to report, not a reason to go anonymous, and credentials named for no registry would
/// go to whichever one a reference (or a copied hook configuration) names. [`HOST`] and
/// the reference's registry are compared as the registries they reach
/// ([`registry_origin`]). The values are never part of an error, nor [`HOST`] unless it is
/// a registry's name.
fn auth_from(
    registry: &str,
    username: Option<OsString>,
    password: Option<OsString>,
    host: Option<OsString>,
) -> Result<Auth, String> {
    let text = |name: &str, value: OsString| {
        value
            .into_string()
            .map_err(|_| format!("{name} is not valid UTF-8"))
    };
    let (username, password) = match (username, password) {
        (Some(username), Some(password)) => (username, password),
        (None, None) => return Ok(Auth::sending(RegistryAuth::Anonymous)),
        (Some(_), None) => {
            return Err(format!("{USERNAME} is set but {PASSWORD} is not: set both"))
        }
        (None, Some(_)) => {
            return Err(format!("{PASSWORD} is set but {USERNAME} is not: set both"))
        }
    };
    let Some(host) = host else {
        return Err(format!(
            "{USERNAME} and {PASSWORD} are set but {HOST} is not: name the registry they are for"
        ));
    };
    // Not shown: a URL or `user:password@host` here may hold a secret.
    let host = registry_origin(&text(HOST, host)?).ok_or_else(|| {
        format!("{HOST} is not a registry's host[:port] (e.g. ghcr.io or 127.0.0.1:5000)")
    })?;
    if registry_origin(registry).as_ref() != Some(&host) {
        let this = registry.to_ascii_lowercase();
        return Ok(Auth {
            credential: RegistryAuth::Anonymous,
            withheld: Some(format!(
                "{HOST} names another registry than this one, {this}: sent without \
                 credentials"
            )),
        });
    }
    Ok(Auth::sending(RegistryAuth::Basic(
        text(USERNAME, username)?,
        text(PASSWORD, password)?,
    )))
}

/// `registry` (`host[:port]`) as the origin the client reaches, to compare one name with
/// another: the scheme it speaks there (plain http to a loopback registry, as
/// [`crate::registry::is_loopback`] decides from the name as written, https otherwise),
/// the host as the URL parser reads it (in lower case; `127.0.1` is `127.0.0.1`, reached
/// over https) with Docker Hub's other names (`index.docker.io`, `registry-1.docker.io`)
/// as `docker.io`, which oci-spec makes of a reference's `index.docker.io`, and the port,
/// given or implied. `None` if it is not a host and port.
fn registry_origin(registry: &str) -> Option<String> {
    let scheme = match crate::registry::is_loopback(registry) {
        true => "http",
        false => "https",
    };
    let url = url::Url::parse(&format!("{scheme}://{registry}/")).ok()?;
    let bare = url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none();
    let host = match url.host_str().filter(|_| bare)? {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        host => host,
    };
    Some(format!(
        "{scheme}://{host}:{}",
        url.port_or_known_default()?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes already stored are not written again: a tag's manifest, fetched at every
    /// pull, costs no rewrite, sync or prune per call.
    #[test]
    fn bytes_already_cached_are_not_written_again() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let manifest = br#"{"schemaVersion":2}"#;
        keep(Some(&cache), manifest);
        let digest = sha256_digest(manifest);
        let stored = dir
            .path()
            .join("oci/blobs/sha256")
            .join(sha256_hex(&digest).unwrap());
        let inode = std::fs::metadata(&stored).expect("stored").ino();
        keep(Some(&cache), manifest);
        assert_eq!(
            std::fs::metadata(&stored).unwrap().ino(),
            inode,
            "rewritten"
        );
    }

    #[test]
    fn references_name_a_registry_and_only_sha256_digests() {
        let pinned = format!(
            "oci://127.0.0.1:5000/ahp/interceptor@sha256:{}",
            "a".repeat(64)
        );
        let reference = parse_reference(&pinned).unwrap();
        assert_eq!(reference.registry(), "127.0.0.1:5000");
        assert_eq!(reference.repository(), "ahp/interceptor");
        assert!(parse_reference("127.0.0.1:5000/ahp/interceptor:0.1.0").is_ok());
        assert!(parse_reference("localhost/ahp/interceptor:1").is_ok());
        assert!(parse_reference("ghcr.io/ahp/interceptor:1").is_ok());
        for bad in [
            "oci://interceptor",
            "oci://127.0.0.1:5000/ahp/interceptor@sha256:abc",
            "oci://127.0.0.1:5000/ahp/Interceptor:0.1.0",
            "oci://",
        ] {
            assert!(parse_reference(bad).is_err(), "{bad}");
        }
    }

    /// A tag is `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}` (the OCI distribution spec), ASCII:
    /// oci-spec's pattern (`\w`) takes any Unicode letter or digit.
    #[test]
    fn a_tag_outside_the_oci_grammar_is_refused_by_name() {
        let reference = |tag: &str| format!("127.0.0.1:5000/ahp/interceptor:{tag}");
        for good in ["0.1.0", "_x", "A-b.c_D", &"a".repeat(128)] {
            assert!(parse_reference(&reference(good)).is_ok(), "{good}");
        }
        for bad in ["ναι", "x١", "-x", ".x", "", &"a".repeat(129)] {
            let error = parse_reference(&reference(bad)).err();
            let error = error.unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(error.contains("is not an OCI tag"), "{bad}: {error}");
        }
    }

    /// `ahp/interceptor:1` would mean Docker Hub: the first component must be a host.
    #[test]
    fn a_reference_without_a_registry_host_is_refused() {
        for bad in [
            "oci://ahp/interceptor:1",
            "ahp/interceptor",
            "LOCALHOST/ahp/i:1",
        ] {
            let error = parse_reference(bad).unwrap_err();
            assert!(error.contains("name the registry"), "{bad}: {error}");
        }
    }

    /// Credentials written into a reference are refused and never repeated.
    #[test]
    fn a_reference_with_user_and_password_is_refused_without_echoing_them() {
        let digest = format!("@sha256:{}", "a".repeat(64));
        for bad in [
            "oci://user:s3cret-marker@127.0.0.1:5000/ahp/interceptor:1".to_string(),
            "user:s3cret-marker@ghcr.io/ahp/interceptor".to_string(),
            format!("oci://user:s3cret-marker@ghcr.io/ahp/interceptor{digest}"),
            "oci://user:s3/cret-marker@ghcr.io/ahp/interceptor".to_string(),
            "oci://user:s3cret-marker@ghcr.io".to_string(),
        ] {
            let error = parse_reference(&bad).unwrap_err();
            assert!(!error.contains("cret-marker"), "{bad}: {error}");
            assert!(error.contains("AHP_REGISTRY_PASSWORD"), "{bad}: {error}");
        }
    }

    /// One variable alone, or a value that is not UTF-8, is an error naming the variable,
    /// not anonymous access; no value is ever part of it.
    #[test]
    fn registry_credentials_are_both_or_neither() {
        let set = |value: &str| Some(OsString::from(value));
        let host = set("ghcr.io");
        let auth = |user, password| {
            auth_from("ghcr.io", user, password, host.clone()).map(|auth| auth.credential)
        };
        assert_eq!(auth(None, None), Ok(RegistryAuth::Anonymous));
        assert_eq!(
            auth(set("user"), set("s3cret")),
            Ok(RegistryAuth::Basic("user".into(), "s3cret".into()))
        );
        assert_eq!(
            auth(set("user"), None),
            Err("AHP_REGISTRY_USERNAME is set but AHP_REGISTRY_PASSWORD is not: set both".into())
        );
        assert_eq!(
            auth(None, set("s3cret")),
            Err("AHP_REGISTRY_PASSWORD is set but AHP_REGISTRY_USERNAME is not: set both".into())
        );
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt as _;
            let not_utf8 = Some(OsString::from_vec(b"s3cret\xff".to_vec()));
            assert_eq!(
                auth(set("user"), not_utf8),
                Err("AHP_REGISTRY_PASSWORD is not valid UTF-8".into())
            );
        }
    }

    /// Credentials go only to the registry AHP_REGISTRY_HOST names: another registry (a
    /// reference pointing elsewhere, and then the token service it names) gets anonymous
    /// requests, and credentials named for no registry are an error. Names are compared
    /// as the registries they reach: case, a default port and Docker Hub's other names
    /// make no difference, another port or host does (`localhost` is not `127.0.0.1`).
    #[test]
    fn registry_credentials_go_only_to_the_registry_they_name() {
        let set = |value: &str| Some(OsString::from(value));
        let basic = RegistryAuth::Basic("user".into(), "s3cret".into());
        let (user, password) = (set("user"), set("s3cret"));
        let auth = |registry, host| auth_from(registry, user.clone(), password.clone(), host);
        // As a reference's registry reads: oci-spec makes `index.docker.io` `docker.io`.
        let docker_hub = parse_reference("index.docker.io/ahp/interceptor:1").unwrap();
        for (registry, host) in [
            ("GHCR.io", "ghcr.io"),
            ("127.0.0.1:5000", "127.0.0.1:5000"),
            ("ghcr.io", "ghcr.io:443"),
            ("ghcr.io:443", "GHCR.IO"),
            (docker_hub.registry(), "index.docker.io"),
            ("docker.io", "registry-1.docker.io:443"),
            ("registry-1.docker.io", "docker.io"),
            ("localhost", "localhost:80"),
        ] {
            let sent = auth(registry, set(host)).map(|auth| auth.credential);
            assert_eq!(sent, Ok(basic.clone()), "{registry} named {host}");
        }
        // What the variable names is not repeated: only this registry's name.
        for (registry, host, this) in [
            ("evil.example", "ghcr.io", "evil.example"),
            ("127.0.0.1:5001", "127.0.0.1:5000", "127.0.0.1:5001"),
            ("127.0.0.1:5000", "localhost:5000", "127.0.0.1:5000"),
            // Plain http to a loopback registry: 443 is just another port.
            ("localhost:443", "localhost", "localhost:443"),
            ("ghcr.io:8443", "GHCR.io:443", "ghcr.io:8443"),
            // Another spelling of a loopback address, which the client does not take
            // for one: https on 443, not the plain http on 80 the variable names.
            ("127.0.1", "127.0.0.1", "127.0.1"),
            ("2130706433", "127.0.0.1:80", "2130706433"),
        ] {
            let why = format!(
                "AHP_REGISTRY_HOST names another registry than this one, {this}: sent without \
                 credentials"
            );
            let withheld = Auth {
                credential: RegistryAuth::Anonymous,
                withheld: Some(why),
            };
            assert_eq!(auth(registry, set(host)), Ok(withheld), "{registry}");
        }
        let unnamed = auth("ghcr.io", None).unwrap_err();
        assert!(
            unnamed.contains("AHP_REGISTRY_HOST") && !unnamed.contains("s3cret"),
            "{unnamed}"
        );
        // Not a registry's name, which is not repeated: it may hold a secret.
        for host in [
            "https://ghcr.io",
            "hunter2:s3cret@ghcr.io",
            "ghcr.io/hunter2",
            "ghcr.io?s3cret",
            "",
        ] {
            let error = auth("ghcr.io", set(host)).unwrap_err();
            assert!(
                error.starts_with("AHP_REGISTRY_HOST is not a registry's host[:port]")
                    && !error.contains("s3cret")
                    && !error.contains("hunter2"),
                "{host}: {error}"
            );
        }
    }

    /// A pull or a push the registry refuses with a 401, its credentials withheld because
    /// AHP_REGISTRY_HOST names another registry, says so, naming both and no secret; a
    /// refusal that is not a 401, or a 401 with nothing withheld, is as it was.
    #[tokio::test]
    async fn a_401_says_when_the_credentials_were_withheld_for_another_registry() {
        use crate::registry::fake::{answer, answering};
        let addr = answering(|request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") => answer(
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"r\"\r\n",
                b"",
            ),
            r if r.starts_with("HEAD ") => answer("404 Not Found", "", b""),
            r if r.starts_with("POST ") => answer("401 Unauthorized", "", b""),
            _ => answer("403 Forbidden", "", b""),
        })
        .await;
        let set = |value: &str| Some(OsString::from(value));
        let withheld = |registry| {
            auth_from(registry, set("user"), set("s3cret"), set("localhost:5000")).unwrap()
        };
        let registry = addr.to_string();
        let tagged = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        let error = fetch_with(&tagged, None, &withheld(&registry)).await;
        let expected = format!(
            "pull the manifest of {registry}/ahp/interceptor:0.1: the registry answered 401 \
             Unauthorized (AHP_REGISTRY_HOST names another registry than this one, \
             {registry}: sent without credentials)"
        );
        assert_eq!(error, Err(PullError::Refused(expected)));
        let anonymous = Auth::sending(RegistryAuth::Anonymous);
        let error = fetch_with(&tagged, None, &anonymous).await.unwrap_err();
        assert!(!error.to_string().contains("AHP_REGISTRY_HOST"), "{error}");
        let forbidden = parse_reference(&format!("{addr}/ahp/interceptor:0.2")).unwrap();
        let error = fetch_with(&forbidden, None, &withheld(&registry))
            .await
            .unwrap_err();
        assert!(!error.to_string().contains("AHP_REGISTRY_HOST"), "{error}");
        let component = crate::EMBEDDED_COMPONENT.to_vec();
        let error = store_with(&tagged, component, &withheld(&registry)).await;
        let expected = format!(
            "push to {registry}/ahp/interceptor:0.1: upload the component blob: the registry \
             answered 401 Unauthorized (AHP_REGISTRY_HOST names another registry than this \
             one, {registry}: sent without credentials)"
        );
        assert_eq!(error.err(), Some(expected));
        // A secret set in AHP_REGISTRY_HOST by mistake (it reads as a host) is not shown.
        let mistaken = auth_from(&registry, set("user"), set("pw"), set("ghp_s3cret")).unwrap();
        let error = fetch_with(&tagged, None, &mistaken).await.unwrap_err();
        assert!(error.to_string().contains("AHP_REGISTRY_HOST"), "{error}");
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }

    #[test]
    fn a_manifest_must_be_a_wasm_artifact_with_one_layer() {
        let layer = format!(
            r#"{{"mediaType":"application/wasm","digest":"sha256:{}","size":3}}"#,
            "b".repeat(64)
        );
        let manifest = |config_type: &str, layers: &str| {
            format!(
                r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
                "config":{{"mediaType":"{config_type}","digest":"sha256:{}","size":2}},
                "layers":[{layers}]}}"#,
                "c".repeat(64)
            )
        };
        let good = manifest(WASM_MANIFEST_CONFIG_MEDIA_TYPE, &layer);
        assert_eq!(component_layer(good.as_bytes()).unwrap().size, 3);
        let image = manifest("application/vnd.oci.image.config.v1+json", &layer);
        assert!(component_layer(image.as_bytes()).is_err());
        let two = manifest(WASM_MANIFEST_CONFIG_MEDIA_TYPE, &format!("{layer},{layer}"));
        assert!(component_layer(two.as_bytes()).is_err());
        assert!(component_layer(b"not json").is_err());
        // An image index, or a Docker manifest list, is refused by name.
        let typed =
            |media_type: &str| format!(r#"{{"schemaVersion":2,"mediaType":"{media_type}"}}"#);
        for index in [
            typed("application/vnd.oci.image.index.v1+json"),
            r#"{"schemaVersion":2,"manifests":[]}"#.to_string(),
            typed("application/vnd.docker.distribution.manifest.list.v2+json"),
        ] {
            let error = component_layer(index.as_bytes()).unwrap_err();
            assert!(error.contains("an image index"), "{index}: {error}");
        }
    }

    /// A layer's `urls` would name places to fetch the component from other than its
    /// registry, over plain http too.
    #[test]
    fn a_layer_with_download_urls_is_refused() {
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{{"mediaType":"{WASM_MANIFEST_CONFIG_MEDIA_TYPE}","digest":"sha256:{}","size":2}},
            "layers":[{{"mediaType":"application/wasm","digest":"sha256:{}","size":3,
            "urls":["http://203.0.113.7/component.wasm"]}}]}}"#,
            "c".repeat(64),
            "b".repeat(64)
        );
        let error = component_layer(manifest.as_bytes()).unwrap_err();
        assert!(error.contains("`urls`"), "{error}");
    }

    /// A pull of `ADDR/ahp/interceptor:0.1` into an empty cache, anonymously, within
    /// `deadline`.
    async fn pull_from(addr: std::net::SocketAddr, deadline: Duration) -> Result<Vec<u8>, String> {
        let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::at(dir.path());
        let pull = async {
            fetch_with(
                &reference,
                Some(&cache),
                &Auth::sending(RegistryAuth::Anonymous),
            )
            .await
            .map(|pulled| pulled.component)
            .map_err(|e| e.to_string())
        };
        within(deadline, "pull", pull).await
    }

    /// A registry that trickles its answer, a byte every 100 ms, keeps every read within
    /// the client's read timeout: only the pull's own deadline ends it.
    #[tokio::test]
    async fn a_registry_that_trickles_is_stopped_by_the_pulls_deadline() {
        let pull = pull_from(trickling_registry().await, Duration::from_millis(500));
        // A guard against hanging, far above the deadline under test.
        let error = tokio::time::timeout(Duration::from_secs(20), pull)
            .await
            .expect("the pull's deadline ended it")
            .unwrap_err();
        assert!(error.contains("not done within 500ms"), "{error}");
    }

    /// A push to a registry that challenges `Bearer`: one token for pulling and pushing,
    /// sent with every request of the push (each blob's HEAD and upload, the manifest), and
    /// one for pulling to read the manifest back.
    #[tokio::test]
    async fn a_push_sends_the_token_got_for_it_with_every_request() {
        let (addr, seen) = authenticating_push_registry(|_| UPLOAD.to_string()).await;
        let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        let component = crate::EMBEDDED_COMPONENT.to_vec();
        let pushed = store(&reference, component.clone()).await.unwrap();
        assert_eq!(pushed.component_digest, sha256_digest(&component));
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen.refused,
            Vec::<String>::new(),
            "requests without the token"
        );
        let scopes: Vec<&str> = seen.token_requests.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            scopes,
            [
                "GET /token?scope=repository%3Aahp%2Finterceptor%3Apull%2Cpush&service=reg",
                "GET /token?scope=repository%3Aahp%2Finterceptor%3Apull&service=reg",
            ]
        );
        assert_eq!(
            seen.blobs.len(),
            2,
            "the component and the config were uploaded"
        );
        assert!(seen.blobs.contains(&pushed.component_digest));
    }

    /// A manifest larger than a pull reads (here made so by a 70,000-character description
    /// in the component's metadata, which its annotations copy) is refused before the
    /// registry is asked anything: stored, it would move the tag to what no pull can read.
    #[tokio::test]
    async fn a_manifest_larger_than_a_pull_reads_is_refused_before_anything_is_sent() {
        use wasm_metadata::{AddMetadata, AddMetadataField, Description};
        let (addr, seen) = authenticating_push_registry(|_| UPLOAD.to_string()).await;
        let mut described = AddMetadata::default();
        described.description = AddMetadataField::Set(Description::new("d".repeat(70_000)));
        let component = described.to_wasm(crate::EMBEDDED_COMPONENT).unwrap();
        let error = refused_push(addr, component).await;
        let size: usize = error
            .split("the OCI manifest is ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no size in: {error}"));
        assert!(size > 70_000, "{error}");
        assert!(error.contains("65536"), "{error}");
        assert_eq!(seen.lock().unwrap().requests, Vec::<String>::new());
    }

    /// The WIT package `ahp component export` writes beside the component is a component
    /// binary too, but one that no one can run: refused by name before the registry is
    /// asked anything.
    #[tokio::test]
    async fn a_wit_package_is_refused_before_anything_is_sent() {
        let (addr, seen) = authenticating_push_registry(|_| UPLOAD.to_string()).await;
        let error = refused_push(addr, crate::EMBEDDED_WIT_PACKAGE.to_vec()).await;
        assert!(
            error.contains("is a WIT package, not a WebAssembly component"),
            "{error}"
        );
        assert_eq!(seen.lock().unwrap().requests, Vec::<String>::new());
    }

    /// A refused push names the step it stopped at and what the registry said (its OCI
    /// error's code and message); a read-back that fails once the manifest is stored says
    /// that the tag was moved all the same.
    #[tokio::test]
    async fn a_refused_push_names_its_step_and_the_registrys_error() {
        use crate::registry::fake::{answer, answering};
        let denied = br#"{"errors":[{"code":"DENIED","message":"denied"}]}"#;
        let addr = answering(move |request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("HEAD ") => answer("404 Not Found", "", b""),
            r if r.starts_with("POST /v2/ahp/interceptor/blobs/uploads/ ") => answer(
                "403 Forbidden",
                "Content-Type: application/json\r\n",
                denied,
            ),
            _ => answer("500 Internal Server Error", "", b""),
        })
        .await;
        let error = refused_push(addr, crate::EMBEDDED_COMPONENT.to_vec()).await;
        assert!(error.contains("upload the component blob"), "{error}");
        assert!(error.contains("403 Forbidden: DENIED: denied"), "{error}");
        // Everything is taken, but the manifest is not there to be read back.
        let addr = answering(|request, _| match request {
            r if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
            r if r.starts_with("HEAD ") => answer("404 Not Found", "", b""),
            r if r.starts_with("POST ") => {
                answer("202 Accepted", &format!("Location: {UPLOAD}\r\n"), b"")
            }
            r if r.starts_with("PUT ") => answer("201 Created", "", b""),
            _ => answer("404 Not Found", "", b""),
        })
        .await;
        let error = refused_push(addr, crate::EMBEDDED_COMPONENT.to_vec()).await;
        assert!(error.contains("read back the manifest"), "{error}");
        assert!(error.contains("the tag 0.1 already names"), "{error}");
    }

    /// A registry that reads anonymously answers `/v2/` with 200 and asks for credentials
    /// only when a push begins: that challenge is answered with the credentials configured
    /// and the request sent again, and they go with the push's requests after it. Nothing
    /// is sent before it is asked for, and the read-back, which is not asked, is anonymous.
    #[tokio::test]
    async fn a_challenge_on_a_push_is_answered_with_the_configured_credentials() {
        use crate::registry::fake::{answer, answering_with_body};
        use std::sync::{Arc, Mutex};
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let stored = Arc::new(Mutex::new(Vec::<u8>::new()));
        let (log, held) = (Arc::clone(&seen), Arc::clone(&stored));
        let addr = answering_with_body(move |head, body, _| {
            let line = head.lines().next().unwrap_or_default();
            let line = line.trim_end_matches(" HTTP/1.1");
            // base64("writer:s3cret")
            let basic = head.contains("authorization: Basic d3JpdGVyOnMzY3JldA==\r\n");
            let other = !basic && head.to_ascii_lowercase().contains("authorization:");
            // Without the digests, which differ from build to build.
            let shown = line.split(['?', '@']).next().unwrap_or_default();
            let shown = shown.split("sha256").next().unwrap_or_default();
            let mark = if basic {
                " +basic"
            } else if other {
                " +other"
            } else {
                ""
            };
            log.lock().unwrap().push(format!("{shown}{mark}"));
            let challenge = "WWW-Authenticate: Basic realm=\"r\"\r\n";
            match line.split_once(' ').unwrap_or_default() {
                _ if other => answer("400 Bad Request", "", b""),
                ("GET", "/v2/") => answer("200 OK", "", b"{}"),
                ("HEAD", _) => answer("404 Not Found", "", b""),
                ("POST" | "PUT", _) if !basic => answer("401 Unauthorized", challenge, b""),
                ("POST", "/v2/ahp/interceptor/blobs/uploads/") => {
                    answer("202 Accepted", &format!("Location: {UPLOAD}\r\n"), b"")
                }
                ("PUT", target) if target.starts_with(UPLOAD) => answer("201 Created", "", b""),
                ("PUT", "/v2/ahp/interceptor/manifests/0.1") => {
                    *held.lock().unwrap() = body;
                    answer("201 Created", "", b"")
                }
                ("GET", target) if target.starts_with("/v2/ahp/interceptor/manifests/sha256:") => {
                    answer("200 OK", "", &held.lock().unwrap())
                }
                _ => answer("404 Not Found", "", b""),
            }
        })
        .await;
        let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        let auth = RegistryAuth::Basic("writer".into(), "s3cret".into());
        let component = crate::EMBEDDED_COMPONENT.to_vec();
        let pushed = store_with(&reference, component, &Auth::sending(auth)).await;
        assert!(pushed.is_ok(), "{:?}", pushed.err());
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "GET /v2/",
                "HEAD /v2/ahp/interceptor/blobs/",
                "POST /v2/ahp/interceptor/blobs/uploads/",
                "POST /v2/ahp/interceptor/blobs/uploads/ +basic",
                "PUT /v2/ahp/interceptor/blobs/uploads/u +basic",
                "HEAD /v2/ahp/interceptor/blobs/ +basic",
                "POST /v2/ahp/interceptor/blobs/uploads/ +basic",
                "PUT /v2/ahp/interceptor/blobs/uploads/u +basic",
                "PUT /v2/ahp/interceptor/manifests/0.1 +basic",
                "GET /v2/",
                "GET /v2/ahp/interceptor/manifests/",
            ]
        );
    }

    /// A blob the registry holds already (its HEAD answers 200) is not uploaded again.
    #[tokio::test]
    async fn a_blob_the_registry_holds_is_not_uploaded_again() {
        let (addr, seen) = authenticating_push_registry(|_| UPLOAD.to_string()).await;
        let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        for _ in 0..2 {
            let component = crate::EMBEDDED_COMPONENT.to_vec();
            store(&reference, component).await.unwrap();
        }
        assert_eq!(seen.lock().unwrap().blobs.len(), 2);
    }

    /// An upload location on the registry's own origin is taken, named by its path or as a
    /// whole URL.
    #[tokio::test]
    async fn an_upload_location_on_the_registrys_origin_is_taken_as_a_path_or_a_url() {
        let locations: [fn(std::net::SocketAddr) -> String; 2] = [
            |_| UPLOAD.to_string(),
            |addr| format!("http://{addr}{UPLOAD}"),
        ];
        for location in locations {
            let (addr, seen) = authenticating_push_registry(location).await;
            let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
            let component = crate::EMBEDDED_COMPONENT.to_vec();
            let pushed = store(&reference, component).await;
            let location = location(addr);
            assert!(pushed.is_ok(), "{location}: {:?}", pushed.err());
            assert_eq!(seen.lock().unwrap().blobs.len(), 2, "{location}");
        }
    }

    /// An upload location on another origin (here another port, in plain http) is refused
    /// before anything goes there (not the registry's token, not the component), naming
    /// its origin only: its query may be a signature.
    #[tokio::test]
    async fn an_upload_location_off_the_registrys_origin_is_refused_and_sent_nothing() {
        use crate::registry::fake::{answer, answering};
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let recorded = std::sync::Arc::clone(&heads);
        let elsewhere = answering(move |head, _| {
            recorded.lock().unwrap().push(head.to_string());
            answer("500 Internal Server Error", "", b"")
        })
        .await;
        let location = format!("http://{elsewhere}/upload?signature=s3cr3t");
        let offered = location.clone();
        let (addr, _) = authenticating_push_registry(move |_| offered.clone()).await;
        let error = refused_push(addr, crate::EMBEDDED_COMPONENT.to_vec()).await;
        assert_eq!(
            *heads.lock().unwrap(),
            Vec::<String>::new(),
            "requests to the other origin"
        );
        assert!(
            error.contains(&format!("on http://{elsewhere},")),
            "{error}"
        );
        assert!(!error.contains("s3cr3t"), "{error}");
    }

    /// What [`authenticating_push_registry`] saw.
    #[derive(Default)]
    struct Seen {
        /// Every request line, in order.
        requests: Vec<String>,
        /// The request lines of token requests (the scope each asked for).
        token_requests: Vec<String>,
        /// Request lines that came without the token.
        refused: Vec<String>,
        /// The digests of the blobs uploaded.
        blobs: Vec<String>,
        manifest: Vec<u8>,
    }

    /// Why a push of `component` to `ahp/interceptor:0.1` at `addr` failed.
    async fn refused_push(addr: std::net::SocketAddr, component: Vec<u8>) -> String {
        let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        store(&reference, component).await.err().expect("no push")
    }

    /// Where [`authenticating_push_registry`] takes a blob's upload.
    const UPLOAD: &str = "/v2/ahp/interceptor/blobs/uploads/u";

    /// A loopback registry that wants a token for everything but `/v2/` and its token
    /// service, and takes a push (a blob's HEAD, its upload at [`UPLOAD`], the manifest,
    /// the manifest read back by digest); an upload's start names the `Location` that `location` makes of
    /// the registry's address.
    async fn authenticating_push_registry(
        location: impl Fn(std::net::SocketAddr) -> String + Send + Sync + 'static,
    ) -> (std::net::SocketAddr, std::sync::Arc<std::sync::Mutex<Seen>>) {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
        let shared = std::sync::Arc::clone(&seen);
        let addr = crate::registry::fake::answering_with_body(move |head, body, addr| {
            let line = head.lines().next().unwrap_or_default();
            let line = line.trim_end_matches(" HTTP/1.1");
            let lowercase = head.to_ascii_lowercase();
            let seen = &mut shared.lock().unwrap();
            respond(line, &lowercase, body, addr, &location(addr), seen).into_bytes()
        })
        .await;
        (addr, seen)
    }

    /// The answer of [`authenticating_push_registry`] to `line` (`METHOD TARGET`), whose
    /// uploads start at `location`.
    fn respond(
        line: &str,
        head: &str,
        body: Vec<u8>,
        addr: std::net::SocketAddr,
        location: &str,
        seen: &mut Seen,
    ) -> String {
        seen.requests.push(line.to_string());
        let reply = |status: &str, headers: String| {
            format!("HTTP/1.1 {status}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n")
        };
        if line == "GET /v2/" {
            let realm = format!(
                "WWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"reg\"\r\n"
            );
            return reply("401 Unauthorized", realm);
        }
        if line.starts_with("GET /token?") {
            seen.token_requests.push(line.to_string());
            let token = r#"{"token":"t0k"}"#;
            return format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{token}",
                token.len()
            );
        }
        if !head.contains("authorization: bearer t0k\r\n") {
            seen.refused.push(line.to_string());
            return reply("401 Unauthorized", String::new());
        }
        let digest = sha256_digest(&seen.manifest);
        match line.split_once(' ').unwrap_or_default() {
            ("POST", "/v2/ahp/interceptor/blobs/uploads/") => reply(
                "202 Accepted",
                format!("Location: {location}\r\nRange: 0-0\r\n"),
            ),
            ("PUT", target) if target.starts_with(&format!("{UPLOAD}?digest=")) => {
                let blob = target.rsplit_once('=').map(|(_, d)| d).unwrap_or_default();
                seen.blobs.push(blob.replace("%3A", ":"));
                reply(
                    "201 Created",
                    format!("Location: /v2/ahp/interceptor/blobs/{blob}\r\n"),
                )
            }
            ("HEAD", target)
                if target
                    .strip_prefix("/v2/ahp/interceptor/blobs/")
                    .is_some_and(|blob| seen.blobs.iter().any(|held| held == blob)) =>
            {
                reply("200 OK", String::new())
            }
            ("PUT", "/v2/ahp/interceptor/manifests/0.1") => {
                seen.manifest = body;
                let digest = sha256_digest(&seen.manifest);
                let at = format!("Location: /v2/ahp/interceptor/manifests/{digest}\r\n");
                reply("201 Created", at)
            }
            ("GET", target) if target == format!("/v2/ahp/interceptor/manifests/{digest}") => {
                let manifest = String::from_utf8_lossy(&seen.manifest).into_owned();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{manifest}",
                    manifest.len()
                )
            }
            _ => reply("404 Not Found", String::new()),
        }
    }

    /// A registry that takes the request and never answers holds a push only until its
    /// deadline (the client's read timeout alone would wait 60 s per read).
    #[tokio::test]
    async fn a_registry_that_never_answers_is_stopped_by_the_pushs_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let reference = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        let component = crate::EMBEDDED_COMPONENT.to_vec();
        let push = within(
            Duration::from_millis(500),
            "push",
            store(&reference, component),
        );
        // A guard against hanging, far above the deadline under test.
        let error = tokio::time::timeout(Duration::from_secs(20), push)
            .await
            .expect("the push's deadline ended it")
            .err()
            .expect("no push");
        assert!(error.contains("not done within 500ms"), "{error}");
    }

    /// A registry that sends a manifest far larger than any is stopped at the bound, with
    /// its length declared up front (nothing of the body is read) or not (chunked): the
    /// pull neither holds nor waits for the rest.
    #[tokio::test]
    async fn a_flood_of_manifest_is_cut_off_at_its_bound() {
        for declared in [true, false] {
            let (addr, written) = flooding_registry(declared).await;
            let error = pull_from(addr, Duration::from_secs(20)).await.unwrap_err();
            assert!(
                error.contains("the registry's answer is larger than 65536 bytes"),
                "{error}"
            );
            // What the registry got out before the pull hung up: socket buffers at most,
            // never the whole body.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let written = written.load(std::sync::atomic::Ordering::SeqCst);
            assert!(
                written < 16 << 20,
                "declared {declared}: {written} bytes sent"
            );
        }
    }

    /// A wasm component's OCI manifest: its one layer `digest`, said to be `size` bytes.
    fn wasm_manifest(digest: &str, size: usize) -> String {
        use oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_IMAGE_MEDIA_TYPE}",
            "config":{{"mediaType":"{WASM_MANIFEST_CONFIG_MEDIA_TYPE}","digest":"sha256:{}","size":2}},
            "layers":[{{"mediaType":"application/wasm","digest":"{digest}","size":{size}}}]}}"#,
            "c".repeat(64)
        )
    }

    /// A registry that wants a token for everything gets it on the component's read too,
    /// the manifest read from it or from the cache; whether it challenges at `/v2/` or,
    /// answering that 200, only on the manifest and the blob (a public repository whose
    /// anonymous pulls need a token).
    #[tokio::test]
    async fn the_component_is_read_with_the_registrys_token() {
        use crate::registry::fake::{answer, answering};
        let component = b"\0asm component bytes".to_vec();
        let component_digest = sha256_digest(&component);
        let manifest = wasm_manifest(&component_digest, component.len());
        let manifest_digest = sha256_digest(manifest.as_bytes());
        for challenged_at_v2 in [true, false] {
            let (served_manifest, served_component) = (manifest.clone(), component.clone());
            let blob_path = format!("GET /v2/ahp/interceptor/blobs/{component_digest} ");
            let addr = answering(move |request, addr| {
                let authorized = request.contains("authorization: Bearer t0k");
                let challenge =
                    format!("WWW-Authenticate: Bearer realm=\"http://{addr}/token\"\r\n");
                match request {
                    r if r.starts_with("GET /v2/ ") && !challenged_at_v2 => {
                        answer("200 OK", "", b"{}")
                    }
                    // Asked anonymously: a token service that gets credentials refuses.
                    r if r.starts_with("GET /token?")
                        && !r.to_ascii_lowercase().contains("authorization:") =>
                    {
                        answer("200 OK", "", br#"{"token":"t0k"}"#)
                    }
                    r if authorized && r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") => {
                        answer("200 OK", "", served_manifest.as_bytes())
                    }
                    r if authorized && r.starts_with(&blob_path) => {
                        answer("200 OK", "", &served_component)
                    }
                    _ => answer("401 Unauthorized", &challenge, b""),
                }
            })
            .await;
            let dir = tempfile::tempdir().unwrap();
            let cache = ComponentCache::at(dir.path());
            let tagged = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
            assert_eq!(
                fetch_with(
                    &tagged,
                    Some(&cache),
                    &Auth::sending(RegistryAuth::Anonymous)
                )
                .await,
                Ok(Pulled {
                    component: component.clone(),
                    manifest_digest: manifest_digest.clone(),
                }),
                "challenged at /v2/: {challenged_at_v2}"
            );
            // The manifest in the cache, the component not: the registry is asked for it
            // alone.
            let dir = tempfile::tempdir().unwrap();
            let cache = ComponentCache::at(dir.path());
            cache.put(manifest.as_bytes()).unwrap();
            let pinned =
                parse_reference(&format!("{addr}/ahp/interceptor:0.1@{manifest_digest}")).unwrap();
            assert_eq!(
                fetch_with(
                    &pinned,
                    Some(&cache),
                    &Auth::sending(RegistryAuth::Anonymous)
                )
                .await,
                Ok(Pulled {
                    component: component.clone(),
                    manifest_digest: manifest_digest.clone(),
                }),
                "challenged at /v2/: {challenged_at_v2}"
            );
        }
    }

    /// A pull that would fail again is refused, not unavailable: credentials refused
    /// (401 or 403, from the registry or from its token service) and a component longer
    /// or shorter than its manifest says give the same answer whenever asked; an error status may
    /// not, nor a 403 where a redirect led (storage that was sent no credentials).
    #[tokio::test]
    async fn a_pull_that_would_fail_again_is_refused() {
        use crate::registry::fake::{answer, answering};
        let component = b"\0asm component bytes".to_vec();
        let component_digest = sha256_digest(&component);
        // The layer says one byte less than the registry serves; or one more.
        let longer = wasm_manifest(&component_digest, component.len() - 1);
        let shorter = wasm_manifest(&component_digest, component.len() + 1);
        let blob_path = format!("GET /v2/ahp/interceptor/blobs/{component_digest} ");
        for (case, lasting) in [
            ("a token refused", true),
            ("a manifest forbidden", true),
            ("a component longer than said", true),
            ("a component shorter than said", true),
            ("a registry unavailable", false),
            ("storage forbidden", false),
        ] {
            let manifest = match case {
                "a component shorter than said" => shorter.clone(),
                _ => longer.clone(),
            };
            let (component, blob_path) = (component.clone(), blob_path.clone());
            let storage = answering(|_, _| answer("403 Forbidden", "", b"")).await;
            let addr = answering(move |request, addr| match (case, request) {
                ("a token refused", r) if r.starts_with("GET /v2/ ") => {
                    let challenge =
                        format!("WWW-Authenticate: Bearer realm=\"http://{addr}/token\"\r\n");
                    answer("401 Unauthorized", &challenge, b"")
                }
                (_, r) if r.starts_with("GET /v2/ ") => answer("200 OK", "", b"{}"),
                ("a manifest forbidden", _) => answer("403 Forbidden", "", b""),
                ("a registry unavailable", _) => answer("503 Service Unavailable", "", b""),
                (_, r) if r.starts_with("GET /v2/ahp/interceptor/manifests/0.1 ") => {
                    answer("200 OK", "", manifest.as_bytes())
                }
                ("storage forbidden", r) if r.starts_with(&blob_path) => {
                    let to = format!("Location: http://{storage}/blob\r\n");
                    answer("307 Temporary Redirect", &to, b"")
                }
                (_, r) if r.starts_with(&blob_path) => answer("200 OK", "", &component),
                _ => answer("401 Unauthorized", "", b""),
            })
            .await;
            let tagged = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
            let pulled = fetch_with(&tagged, None, &Auth::sending(RegistryAuth::Anonymous)).await;
            match (pulled, lasting) {
                (Err(PullError::Refused(_)), true) | (Err(PullError::Unavailable(_)), false) => {}
                (other, _) => panic!("{case}: {other:?}"),
            }
        }
    }

    /// What this client's own rules refuse of a registry's answers is refused, not
    /// unavailable: the same answers come again, so asking later cannot help (and `ahp
    /// hook install` refuses the component rather than install hooks that deny every
    /// call). A registry not reached is unavailable.
    #[tokio::test]
    async fn a_pull_this_clients_rules_refuse_is_refused() {
        use crate::registry::fake::{answer, answering};
        const BEARER: &str = "WWW-Authenticate: Bearer realm=\"http://ADDR/token\"\r\n";
        for (case, status, headers, token, expected) in [
            (
                "a plain-http realm",
                "401 Unauthorized",
                "WWW-Authenticate: Bearer realm=\"http://example.com/token\"\r\n",
                "",
                "the registry's token service (realm) is plain http: refused",
            ),
            (
                "no realm",
                "401 Unauthorized",
                "WWW-Authenticate: Bearer service=\"reg\"\r\n",
                "",
                "the registry's Bearer challenge names no realm",
            ),
            (
                "a realm that is no URL",
                "401 Unauthorized",
                "WWW-Authenticate: Bearer realm=\"token\"\r\n",
                "",
                "the registry's token service (realm) is not a URL",
            ),
            (
                "a token answer that is no token response",
                "401 Unauthorized",
                BEARER,
                "<html>",
                "the token service's answer is not a token response",
            ),
            (
                "a token answer without a token",
                "401 Unauthorized",
                BEARER,
                "{}",
                "the token service's answer holds no token",
            ),
            (
                "a token no header can carry",
                "401 Unauthorized",
                BEARER,
                r#"{"token":"t\u0000k"}"#,
                "the token service's token cannot be sent in a header",
            ),
            (
                "a redirect to plain http",
                "307 Temporary Redirect",
                "Location: http://example.com/v2/\r\n",
                "",
                "a redirect to plain http: refused",
            ),
            (
                "a redirect to no URL",
                "307 Temporary Redirect",
                "Location: http://[oops/\r\n",
                "",
                "a redirect to a location that is not a URL",
            ),
            (
                "a redirect loop",
                "307 Temporary Redirect",
                "Location: /v2/\r\n",
                "",
                "more than 10 redirects",
            ),
        ] {
            let addr = answering(move |request, addr| match request {
                r if r.starts_with("GET /v2/ ") => {
                    answer(status, &headers.replace("ADDR", &addr.to_string()), b"")
                }
                r if r.starts_with("GET /token?") => answer("200 OK", "", token.as_bytes()),
                _ => answer("404 Not Found", "", b""),
            })
            .await;
            let tagged = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
            let pulled = fetch_with(&tagged, None, &Auth::sending(RegistryAuth::Anonymous)).await;
            match pulled {
                Err(PullError::Refused(e)) if e.contains(expected) => {}
                other => panic!("{case}: {other:?}"),
            }
        }
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let tagged = parse_reference(&format!("{addr}/ahp/interceptor:0.1")).unwrap();
        let pulled = fetch_with(&tagged, None, &Auth::sending(RegistryAuth::Anonymous)).await;
        assert!(
            matches!(pulled, Err(PullError::Unavailable(_))),
            "not reached: {pulled:?}"
        );
    }

    /// How much manifest [`flooding_registry`] sends.
    const FLOOD_BYTES: u64 = 256 << 20;

    /// A loopback "registry" that answers `/v2/` (the client's authentication probe) with
    /// `{}` and every other request with [`FLOOD_BYTES`] of body, its length `declared`
    /// or chunked; it counts the body bytes it got out.
    async fn flooding_registry(
        declared: bool,
    ) -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let written = std::sync::Arc::new(AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&written);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counted = std::sync::Arc::clone(&counted);
                tokio::spawn(async move {
                    let mut request = [0; 4096];
                    let Ok(n) = stream.read(&mut request).await else {
                        return;
                    };
                    if request[..n].starts_with(b"GET /v2/ ") {
                        let probe = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                        let _ = stream.write_all(probe.as_bytes()).await;
                        return;
                    }
                    let head = if declared {
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {FLOOD_BYTES}\r\n\r\n")
                    } else {
                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()
                    };
                    if stream.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let block = vec![b' '; 64 << 10];
                    let mut sent = 0;
                    while sent < FLOOD_BYTES {
                        let chunk = if declared {
                            block.clone()
                        } else {
                            [format!("{:x}\r\n", block.len()).as_bytes(), &block, b"\r\n"].concat()
                        };
                        if stream.write_all(&chunk).await.is_err() {
                            return;
                        }
                        sent += block.len() as u64;
                        counted.fetch_add(block.len() as u64, Ordering::SeqCst);
                    }
                    if !declared {
                        let _ = stream.write_all(b"0\r\n\r\n").await;
                    }
                });
            }
        });
        (addr, written)
    }

    /// A loopback "registry" that answers every request with a 64 KiB body, one byte
    /// every 100 ms: each read is quick, the whole never ends.
    async fn trickling_registry() -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = stream.read(&mut [0; 4096]).await;
                    let head = "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n";
                    let mut answer = stream.write_all(head.as_bytes()).await;
                    while answer.is_ok() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        answer = stream.write_all(b" ").await;
                    }
                });
            }
        });
        addr
    }
}
