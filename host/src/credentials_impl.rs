//! `ahp:interceptor/credentials`: a backend's credential, resolved by the host inside the
//! caller's deadline and handed to the component only as an opaque resource.

use crate::bindings::credentials::{self as wit, AuthError};
use crate::capabilities::credentials::{AuthFailure, CredentialPurpose};
use crate::clock;
use crate::interrupt::{CancelOnDrop, Interrupt};
use crate::state::HostState;
use crate::types::Credential;
use wasmtime::component::Resource;

impl wit::HostCredential for HostState {
    fn drop(&mut self, credential: Resource<Credential>) -> wasmtime::Result<()> {
        self.table.delete(credential)?;
        Ok(())
    }
}

impl wit::Host for HostState {
    async fn acquire(
        &mut self,
        backend: String,
        deadline: u64,
    ) -> wasmtime::Result<Result<Option<Resource<Credential>>, AuthError>> {
        let backends = self.backends.clone();
        let Some(source) = backends.get(&backend).and_then(|b| b.credentials.as_ref()) else {
            return Ok(Ok(None));
        };
        // A stopped call starts no acquisition (which may send a client secret), and
        // stopping wins whenever both are ready. Nor does one held back for settling,
        // which gives way instead.
        if self.stopped() || !self.may_start_io() {
            return Ok(Err(AuthError::Cancelled));
        }
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        // Past the deadline no acquisition starts either (the component checked before it
        // asked, but may have been descheduled since): a timeout polls what it bounds
        // once before it looks at the clock, enough to send a client secret.
        if tokio::time::Instant::now() >= deadline {
            return Ok(Err(AuthError::DeadlineExceeded));
        }
        let stopped = self.when_stopped();
        let cancelled = CancelOnDrop(Interrupt::new());
        let cancelled = &cancelled.0;
        let resolved = tokio::select! {
            biased;
            () = stopped => {
                cancelled.interrupt();
                return Ok(Err(AuthError::Cancelled));
            }
            r = source.acquire(&backend, CredentialPurpose::Intercept, deadline, cancelled) => r,
        };
        // Checked again before a credential is handed over: one that came as the call
        // stopped or its deadline passed (a bound polls what it bounds before its clock)
        // would otherwise be used after it ("recheck cancellation and the original
        // deadline before publishing acceptance after external authorization callbacks").
        if resolved.is_ok() {
            if self.stopped() {
                return Ok(Err(AuthError::Cancelled));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Err(AuthError::DeadlineExceeded));
            }
        }
        Ok(match resolved {
            Ok(Some(bearer)) => Ok(Some(self.table.push(Credential { backend, bearer })?)),
            Ok(None) => Ok(None),
            Err(failure) => Err(auth_error(failure)),
        })
    }

    fn reject(&mut self, credential: Resource<Credential>) -> wasmtime::Result<()> {
        let credential = self.table.get(&credential)?;
        if let Some(source) = self
            .backends
            .get(&credential.backend)
            .and_then(|b| b.credentials.as_ref())
        {
            source.reject(&credential.backend, &credential.bearer);
        }
        Ok(())
    }
}

/// A credential failure as the WIT `auth-error`.
fn auth_error(failure: AuthFailure) -> AuthError {
    match failure {
        AuthFailure::Unresolved => AuthError::Unresolved,
        AuthFailure::AcquisitionFailed => AuthError::AcquisitionFailed,
        AuthFailure::RefreshFailed => AuthError::RefreshFailed,
        AuthFailure::Unsupported => AuthError::Unsupported,
        AuthFailure::DeadlineExceeded => AuthError::DeadlineExceeded,
    }
}
