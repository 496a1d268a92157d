//! Credentials: resolved by the host at dispatch, inside the subscription's deadline, and
//! handed to the component only as an opaque resource. The secret itself never crosses
//! the boundary, and every type that holds one prints a redaction.

use super::discovery::Discovery;
use super::oauth::OAuth;
use crate::bindings::interceptor::{AuthPlan, OauthPlan};
use crate::interrupt::Interrupt;
use crate::types::Secret;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// Why a credential could not be had (the WIT `auth-error`); also what an injected
/// [`CredentialProvider`] returns when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthFailure {
    /// A configured reference (`tokenEnv`, `tokenRef`, `clientSecretRef`) has no value.
    Unresolved,
    /// The first acquisition failed (e.g. discovery or the token endpoint).
    AcquisitionFailed,
    /// Renewing a credential that had been issued before failed.
    RefreshFailed,
    /// This kind of authentication cannot be done here.
    Unsupported,
    /// The deadline passed first.
    DeadlineExceeded,
}

/// Which delivery a credential is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CredentialPurpose {
    /// A hook call's exchange with an interceptor: the component asks for it (its
    /// `acquire` import) before it sends the event and reads the decision.
    Intercept,
    /// An observe notification, which the host sends after the call's decision.
    Observe,
}

/// What an injected [`CredentialProvider`] is asked for. Providers read it, never build
/// it: new fields may be added.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CredentialRequest {
    /// The backend id from the registration.
    pub backend: String,
    /// Where the request carrying the credential goes: the backend's `http` URL as
    /// registered (also when an injected transport carries it), `None` for any other
    /// transport.
    pub destination: Option<String>,
    /// Which delivery the credential is for.
    pub purpose: CredentialPurpose,
    /// The calling subscription's deadline: an answer after it is not used.
    pub deadline: std::time::Instant,
    /// Set whenever this acquisition ends for the host: when the hook call is
    /// interrupted or the interceptor shuts down (the host stops waiting at once), at the
    /// deadline, and after the answer was taken too. It lets a provider stop its own
    /// work; it does not mean the answer was discarded.
    pub cancelled: Interrupt,
}

/// A boxed future, as [`CredentialProvider::acquire`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A harness's own source of bearer tokens for one backend, injected through
/// `Options::credential_providers`. It replaces the registration's binding for that
/// backend. The interceptor only borrows it: shutdown does not close or drop its state.
/// As for a [`crate::Transport`], `acquire` and its future run on the hook call's own
/// task and must not block the thread (run blocking work on a thread of its own and
/// await it): the host can stop waiting at the deadline only between two polls.
///
/// ```no_run
/// use ahp_host::{AuthFailure, BoxFuture, CredentialProvider, CredentialRequest};
/// use ahp_host::{Interceptor, Options, Secret};
/// use std::sync::Arc;
///
/// /// Tokens from the harness's own vault client.
/// struct Vault;
///
/// impl CredentialProvider for Vault {
///     fn acquire(&self, request: CredentialRequest) -> BoxFuture<'_, Result<Secret, AuthFailure>> {
///         Box::pin(async move {
///             // Fetch for `request.backend` (bound for `request.destination`), finishing
///             // before `request.deadline`.
///             let token = std::env::var("VAULT_TOKEN").map_err(|_| AuthFailure::Unresolved)?;
///             Ok(Secret::new(token))
///         })
///     }
/// }
///
/// # async fn build(registration: &str) -> Result<(), ahp_host::Error> {
/// let mut options = Options::default();
/// let vault: Arc<dyn CredentialProvider> = Arc::new(Vault);
/// options.credential_providers.insert("com.example.policy".into(), vault);
/// let interceptor = Interceptor::new(registration, options).await?;
/// # Ok(()) }
/// ```
pub trait CredentialProvider: Send + Sync {
    /// A bearer token for `request.backend`, by `request.deadline`.
    fn acquire(&self, request: CredentialRequest) -> BoxFuture<'_, Result<Secret, AuthFailure>>;

    /// The backend answered 401 to `token`: it should not be handed out again. Called
    /// from inside the component's call, synchronously and with no deadline around it:
    /// mark the token and return, never wait here (do any I/O in the next `acquire`).
    fn reject(&self, backend: &str, token: &Secret) {
        let _ = (backend, token);
    }
}

impl fmt::Debug for dyn CredentialProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialProvider")
    }
}

/// Where one backend's credential comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// `tokenEnv`, `tokenRef`: resolved again at every dispatch.
    Bearer(AuthPlan),
    /// The backend's refusals are its own; the token cache is shared.
    OAuth(OauthPlan, Arc<OAuth>, Arc<Refusals>),
    /// The harness's own provider, with the backend's destination to tell it (see
    /// [`CredentialRequest::destination`]).
    Provided(Arc<dyn CredentialProvider>, Option<Arc<str>>),
    /// No binding: none until the backend's 401 challenge, then discovered.
    Discovered(Arc<Discovery>),
}

impl Source {
    /// The backend's credential, by `deadline`: `None` only from discovery before the
    /// backend has challenged (the request goes without one).
    pub async fn acquire(
        &self,
        backend: &str,
        purpose: CredentialPurpose,
        deadline: Instant,
        cancelled: &Interrupt,
    ) -> Result<Option<Secret>, AuthFailure> {
        let lookup = async {
            match self {
                Source::Discovered(discovery) => return discovery.token(deadline).await,
                Source::Bearer(AuthPlan::BearerEnv(name)) => from_env(name, Kind::Token),
                Source::Bearer(AuthPlan::BearerRef(reference)) => {
                    from_reference(reference, Kind::Token).await
                }
                Source::Bearer(AuthPlan::Oauth(_)) => Err(AuthFailure::Unsupported),
                // Paused, no token is asked for: calls fail at once as a renewal that
                // failed, as during the issuer's own pause.
                Source::OAuth(_, _, refusals) if refusals.paused() => {
                    Err(AuthFailure::RefreshFailed)
                }
                Source::OAuth(plan, oauth, _) => oauth.token(plan, deadline).await,
                Source::Provided(provider, destination) => {
                    let request = CredentialRequest {
                        backend: backend.to_string(),
                        destination: destination.as_deref().map(str::to_owned),
                        purpose,
                        deadline: deadline.into_std(),
                        cancelled: cancelled.clone(),
                    };
                    // A provider's token is held to the same rule as every other source:
                    // an empty one would go out as no credential at all.
                    // A provider that panics has failed to acquire ([`crate::caught`]).
                    let token = crate::caught::caught(|| provider.acquire(request))
                        .await
                        .map_err(|()| AuthFailure::AcquisitionFailed)??;
                    usable(token.expose()).ok_or(AuthFailure::AcquisitionFailed)
                }
            }
            .map(Some)
        };
        tokio::time::timeout_at(deadline, lookup)
            .await
            .unwrap_or(Err(AuthFailure::DeadlineExceeded))
    }

    /// The backend answered 401 to `token`.
    pub fn reject(&self, backend: &str, token: &Secret) {
        match self {
            // Re-resolved at every dispatch: there is no cache to drop.
            Source::Bearer(_) => {}
            Source::OAuth(plan, oauth, refusals) => refusals.refused(oauth, plan, token),
            Source::Provided(provider, _) => {
                let rejected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    provider.reject(backend, token)
                }));
                if rejected.is_err() {
                    tracing::error!("an injected credential provider panicked");
                }
            }
            Source::Discovered(discovery) => discovery.reject(token),
        }
    }

    /// The backend answered a request carrying a token with something other than 401:
    /// it takes this source's tokens.
    pub fn accepted(&self) {
        match self {
            Source::OAuth(_, _, refusals) => refusals.accepted(),
            Source::Discovered(discovery) => discovery.accepted(),
            Source::Bearer(_) | Source::Provided(..) => {}
        }
    }

    /// Whether every request to the backend must carry the credential: all but a
    /// backend whose registration names none, which is tried without one first.
    pub fn required(&self) -> bool {
        !matches!(self, Source::Discovered(_))
    }
}

/// One OAuth backend's refusals (401s) of the tokens acquired for it since it last took
/// one, and the pause they started. A backend that refuses every token (an audience it
/// does not take) would otherwise have each call ask the token endpoint twice, the
/// client secret with it, at the pace of the agent's tool calls. The second refusal in a
/// row pauses this backend's acquisitions for 1 s, doubling to 30 s; a token it takes
/// ends that. Kept per backend, not in the token cache, which every backend of one
/// issuer, resource, client and scopes shares: one backend's refusals stop no other's.
/// A refusal counts once per acquisition: only the 401 that drops the token from the
/// cache ([`Refusals::refused`]), not those of other calls that held it too. The same
/// token string issued again after its refusal (an issuer that hands out one still-valid
/// token at every request) is another acquisition and counts again: counted once per
/// string, it never started the pause, and each call cost a token request and two
/// backend requests. A binding learned from the backend's challenge
/// ([`super::discovery`]) keeps its own the same way.
#[derive(Debug, Default)]
pub struct Refusals(std::sync::Mutex<Refused>);

#[derive(Debug, Default)]
struct Refused {
    in_a_row: u32,
    until: Option<Instant>,
}

impl Refusals {
    fn lock(&self) -> std::sync::MutexGuard<'_, Refused> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn paused(&self) -> bool {
        self.lock()
            .until
            .is_some_and(|until| Instant::now() < until)
    }

    /// The backend answered 401 to `token`, one of `plan`'s from `oauth`: the cache drops
    /// it, and the refusal counts only if the cache still held it. One replaced since (a
    /// call that took it before a refresh) is a stale 401 that does not invalidate the
    /// newer token (digest §12), and must not pause it either.
    pub(super) fn refused(&self, oauth: &OAuth, plan: &OauthPlan, token: &Secret) {
        if oauth.reject(plan, token) {
            self.count();
        }
    }

    fn count(&self) {
        let mut refused = self.lock();
        refused.in_a_row = refused.in_a_row.saturating_add(1);
        refused.until =
            super::oauth::pause_after(refused.in_a_row).map(|pause| Instant::now() + pause);
    }

    pub(super) fn accepted(&self) {
        *self.lock() = Refused::default();
    }
}

/// What a secret reference names, which decides what text is fit to be one.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    /// A bearer token: it goes into a header as it is ([`usable`]).
    Token,
    /// An OAuth client secret: form-encoded on its way (RFC 6749 §2.3.1), so any visible
    /// ASCII and the space, as Appendix A.2 allows (`%x20-7E`); a bearer token's check
    /// refused a secret with a space in it as unresolved, and that client could never
    /// authenticate.
    ClientSecret,
}

impl Kind {
    /// `text` (trimmed already) as a secret of this kind, if it is fit to be one.
    fn fit(self, text: &str) -> Option<Secret> {
        match self {
            Kind::Token => usable(text),
            Kind::ClientSecret => {
                let ok = !text.is_empty() && text.bytes().all(|b| (0x20..=0x7e).contains(&b));
                ok.then(|| Secret::new(text))
            }
        }
    }
}

fn from_env(name: &str, kind: Kind) -> Result<Secret, AuthFailure> {
    std::env::var(name)
        .ok()
        .and_then(|v| kind.fit(v.trim()))
        .ok_or(AuthFailure::Unresolved)
}

/// `file:PATH` (read at every dispatch, so a rotated file is picked up) or `env:NAME`,
/// a secret of `kind`.
pub(super) async fn from_reference(reference: &str, kind: Kind) -> Result<Secret, AuthFailure> {
    if let Some(path) = file_of(reference) {
        let text = read_shared(path).await?;
        return kind.fit(text.expose()).ok_or(AuthFailure::Unresolved);
    }
    if let Some(name) = reference.strip_prefix("env:") {
        return from_env(name, kind);
    }
    Err(AuthFailure::Unsupported)
}

/// The path a `file:PATH` secret reference names; `None` for any other reference.
pub(crate) fn file_of(reference: &str) -> Option<&str> {
    reference.strip_prefix("file:")
}

/// A secret file's read in flight, and its result once it has one.
type Reading = tokio::sync::watch::Receiver<Option<Result<Secret, AuthFailure>>>;

/// The secret file reads in flight in this process, by path.
static READING: Mutex<BTreeMap<String, Reading>> = Mutex::new(BTreeMap::new());

/// The trimmed text of the secret file at `path`, not yet checked for what it is meant
/// to be ([`Kind`]). Read on a blocking thread, or waits for the read of it
/// already in flight. A read that never ends (a FIFO nobody writes, a mount gone away)
/// then holds one thread, however many dispatches give up waiting for it, rather than one
/// each until the runtime's blocking pool is full, and its name lookups and file reads
/// with it. A dispatch after a read ended starts a new one: a rotated file is picked up.
async fn read_shared(path: &str) -> Result<Secret, AuthFailure> {
    let (mut reading, begun) = {
        let mut reads = READING.lock().unwrap_or_else(PoisonError::into_inner);
        match reads.get(path) {
            Some(reading) => (reading.clone(), None),
            None => {
                let (result, reading) = tokio::sync::watch::channel(None);
                reads.insert(path.to_owned(), reading.clone());
                (reading, Some(result))
            }
        }
    };
    // Begun with the lock released: a blocking pool shutting down drops the task, and
    // with it `done`, at once, on this thread, and `Done` takes the lock.
    if let Some(result) = begun {
        let done = Done(path.to_owned());
        // A read never begun ends as one that failed: its waiters' channel closes.
        drop(tokio::task::spawn_blocking(move || {
            let read = read_secret_file(&done.0).map(|text| Secret::new(text.trim()));
            drop(done);
            result.send_replace(Some(read));
        }));
    }
    let read = match reading.wait_for(Option::is_some).await {
        Ok(read) => read.clone().unwrap_or(Err(AuthFailure::Unresolved)),
        Err(_) => Err(AuthFailure::Unresolved),
    };
    read
}

/// Takes a read's path out of [`READING`] when the read ends, however it ends.
struct Done(String);

impl Drop for Done {
    fn drop(&mut self) {
        READING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.0);
    }
}

/// Whether the client secret reference `reference` (`file:PATH` or `env:NAME`) resolves
/// to a usable secret now, as [`from_reference`] would; for the command line's warnings
/// ahead of any call, off the async runtime. A FIFO (a secret manager's) counts as
/// resolving, unread: reading it would wait for a writer, and take the secret its first
/// dispatch needs.
#[cfg(feature = "cli")]
pub(crate) fn resolves(reference: &str) -> bool {
    let kind = Kind::ClientSecret;
    match reference.split_once(':') {
        Some(("file", path)) => {
            is_fifo(path)
                || read_secret_file(path).is_ok_and(|text| kind.fit(text.trim()).is_some())
        }
        Some(("env", name)) => from_env(name, kind).is_ok(),
        _ => false,
    }
}

/// Whether `path` is absolute and names a FIFO; looked at without opening it.
#[cfg(feature = "cli")]
fn is_fifo(path: &str) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        std::path::Path::new(path).is_absolute()
            && std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_fifo())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// The largest secret file read: a token or a client secret, with room for a JWT.
const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;

/// A secret file's text. Only an absolute path: a relative one would be read from wherever
/// the process runs, and a hook runs in the project the agent works in, where the agent
/// or the repository's author could put a file of their own (and so another identity).
/// Read to a bound, so a huge or endless file cannot fill memory.
fn read_secret_file(path: &str) -> Result<String, AuthFailure> {
    use std::io::Read as _;
    if !std::path::Path::new(path).is_absolute() {
        return Err(AuthFailure::Unresolved);
    }
    let file = std::fs::File::open(path).map_err(|_| AuthFailure::Unresolved)?;
    let mut text = String::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| AuthFailure::Unresolved)?;
    if text.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(AuthFailure::Unresolved);
    }
    Ok(text)
}

/// A token fit for an HTTP header: non-empty visible ASCII, no spaces.
pub(super) fn usable(token: &str) -> Option<Secret> {
    let ok = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
    ok.then(|| Secret::new(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The second refusal in a row pauses; a token taken ends the run. (Which 401s
    /// count is the cache's to say: `oauth`'s tests.)
    #[tokio::test]
    async fn refusals_pause_from_the_second_in_a_row_until_a_token_is_taken() {
        let refusals = Refusals::default();
        refusals.count();
        assert!(!refusals.paused(), "one refusal");
        refusals.count();
        assert!(refusals.paused(), "two in a row");
        refusals.accepted();
        assert!(!refusals.paused());
        refusals.count();
        assert!(!refusals.paused(), "the run starts again");
    }

    /// A read asked of a runtime whose blocking pool has shut down never begins: its
    /// waiters learn at once that it failed. (Begun under the lock on the reads in
    /// flight, the dropped task's `Done` took that lock again on the same thread: a
    /// deadlock, and every secret file read in the process after it stuck.)
    #[test]
    fn a_read_refused_by_a_runtime_shutting_down_fails_at_once() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let handle = runtime.handle().clone();
        drop(runtime);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "a-token").unwrap();
        let reference = format!("file:{}", path.display());
        let (sent, read) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(
                handle
                    .block_on(from_reference(&reference, Kind::Token))
                    .err(),
            );
        });
        let failure = read
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the read ended");
        assert_eq!(failure, Some(AuthFailure::Unresolved));
    }

    /// A secret file is read only by an absolute path, and only up to its bound.
    #[test]
    fn a_secret_file_is_absolute_and_bounded() {
        // The test's working directory holds a token a relative reference would find.
        let here = tempfile::tempdir_in(".").expect("a directory in the working directory");
        std::fs::write(here.path().join("token"), "planted").expect("write");
        let relative = here
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a name");
        assert_eq!(
            read_secret_file(&format!("{relative}/token")),
            Err(AuthFailure::Unresolved)
        );
        let absolute = here.path().canonicalize().expect("absolute").join("token");
        assert_eq!(
            read_secret_file(absolute.to_str().expect("UTF-8")).as_deref(),
            Ok("planted")
        );

        let large = here.path().canonicalize().expect("absolute").join("large");
        std::fs::write(&large, "t".repeat(MAX_SECRET_FILE_BYTES as usize + 1)).expect("write");
        assert_eq!(
            read_secret_file(large.to_str().expect("UTF-8")),
            Err(AuthFailure::Unresolved)
        );
    }

    /// A client secret may hold spaces (RFC 6749 Appendix A.2), which a token may not:
    /// each kind is checked for what it is.
    #[tokio::test]
    async fn a_client_secret_may_hold_what_a_token_may_not() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("secret");
        std::fs::write(&path, "two words\n").expect("write");
        let reference = format!("file:{}", path.display());
        let secret = from_reference(&reference, Kind::ClientSecret).await;
        assert_eq!(
            secret.map(|s| s.expose().to_string()),
            Ok("two words".into())
        );
        let token = from_reference(&reference, Kind::Token).await.err();
        assert_eq!(token, Some(AuthFailure::Unresolved));
        for unfit in ["", "tab\there", "line\nbreak", "caf\u{e9}"] {
            assert!(Kind::ClientSecret.fit(unfit).is_none(), "{unfit:?}");
        }
    }

    #[test]
    fn only_header_safe_tokens_are_usable() {
        assert!(usable("abc.DEF-123_~+/=").is_some());
        for bad in ["", "two words", "line\nbreak", "tab\t", "é"] {
            assert!(usable(bad).is_none(), "{bad:?}");
        }
    }
}
