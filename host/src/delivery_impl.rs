//! `ahp:interceptor/delivery`: one exchange with a registered backend, inside the
//! deadline the component passed; everything a backend or the network can do wrong is a
//! WIT `delivery-error`, and only host bugs trap. Also the SHA-256 of each request for
//! the audit record, which the host's SHA instructions compute far faster than wasm can.

use crate::bindings::delivery::{self as wit, Reply};
use crate::bindings::host_types::DeliveryError;
use crate::clock;
use crate::interrupt::{CancelOnDrop, Interrupt};
use crate::retry::wait_to_retry;
use crate::state::HostState;
use crate::types::Credential;
use sha2::{Digest, Sha256};
use wasmtime::component::Resource;

impl wit::Host for HostState {
    async fn exchange(
        &mut self,
        backend: String,
        message: Vec<u8>,
        credential: Option<Resource<Credential>>,
        deadline: u64,
    ) -> wasmtime::Result<Result<Reply, DeliveryError>> {
        let bearer = match &credential {
            Some(handle) => {
                let credential = self.table.get(handle)?;
                // A credential is only ever sent to the backend it was acquired for.
                if credential.backend != backend {
                    return Ok(Err(DeliveryError::NotPermitted));
                }
                Some(credential.bearer.clone())
            }
            None => None,
        };
        let backends = self.backends.clone();
        let Some(target) = backends.get(&backend) else {
            return Ok(Err(DeliveryError::NotPermitted));
        };
        // Never send without the credential an endpoint is configured with.
        if target.credentials.as_ref().is_some_and(|c| c.required()) && bearer.is_none() {
            return Ok(Err(DeliveryError::NotPermitted));
        }
        // A stopped call sends nothing: checked before the exchange starts, and first
        // whenever both are ready (an exchange whose write is ready at once would
        // otherwise win half the races). Nor does one held back for settling, which
        // gives way instead.
        if self.stopped() || !self.may_start_io() {
            return Ok(Err(DeliveryError::Cancelled));
        }
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        let stopped = self.when_stopped();
        let cancelled = CancelOnDrop(Interrupt::new());
        let cancelled = &cancelled.0;
        let exchange = target.exchange(&backend, &message, bearer.as_ref(), deadline, cancelled);
        let delivered = tokio::select! {
            biased;
            () = stopped => {
                cancelled.interrupt();
                Err(DeliveryError::Cancelled)
            }
            r = exchange => r,
        };
        Ok(match delivered {
            // Cancellation belongs to the call and the interceptor: a transport that
            // stops on its own (its owner closed it) has failed, under the policy.
            Err(DeliveryError::Cancelled) if !self.stopped() => Err(DeliveryError::ConnectionLost),
            other => other,
        })
    }

    fn interrupted(&mut self) -> wasmtime::Result<bool> {
        // A call that gave way is over here: the component asks nothing more of it.
        Ok(self.stopped() || self.gave_way())
    }

    fn sha256(&mut self, message: Vec<u8>) -> wasmtime::Result<String> {
        Ok(sha256_hex(&message))
    }

    async fn retry_after(
        &mut self,
        backend: String,
        attempt: u32,
        deadline: u64,
    ) -> wasmtime::Result<bool> {
        let backends = self.backends.clone();
        let Some(target) = backends.get(&backend) else {
            return Ok(false);
        };
        if self.stopped() || !self.may_start_io() {
            return Ok(false);
        }
        let deadline = tokio::time::Instant::from_std(clock::to_instant(deadline));
        let stopped = self.when_stopped();
        Ok(tokio::select! {
            retry = wait_to_retry(target.retries, attempt, deadline) => retry,
            () = stopped => false,
        })
    }
}

/// The 64 lowercase hex digits of `message`'s SHA-256: what the audit records as a
/// request's `requestSha256`, and what the host checks a settlement's entries against.
pub(crate) fn sha256_hex(message: &[u8]) -> String {
    format!("{:x}", Sha256::digest(message))
}
