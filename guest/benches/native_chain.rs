//! The protocol logic of one hook call, natively, with a host that answers at once:
//! the floor for what the same logic costs inside the component.
//!
//! `cargo bench -p ahp-interceptor --bench native_chain`

use ahp_interceptor::engine::Engine;
use ahp_interceptor::host_api::{AuthError, DeliveryError, Host, Instant, Reply};
use std::time::Duration;

const REGISTRATION: &str = r#"{"protocolVersion":"draft","hooks":[{"id":"dev.ahp.bench","transport":{"type":"http","url":"http://127.0.0.1:1/hooks"},"subscriptions":[{"events":["tool.before"],"mode":"intercept","timeoutMs":1000,"failurePolicy":"fail-closed","content":{"default":"metadata"}}]}]}"#;
const EVENT: &str = r#"{"id":"evt_bench","source":"urn:ahp:bench","type":"tool.before","time":"2026-11-30T12:00:00Z","session":{"id":"sess_bench"},"call":{"id":"call_bench"},"tool":{"name":"Bash","input":{"command":"ls -la /tmp"},"origin":"native"},"path":"native"}"#;

struct Instant0(std::time::Instant);

impl Host for Instant0 {
    type Credential = ();
    fn now(&self) -> Instant {
        self.0.elapsed().as_nanos() as u64
    }
    fn acquire(&mut self, _: &str, _: Instant) -> Result<Option<()>, AuthError> {
        Ok(None)
    }
    fn reject(&mut self, _: &()) {}
    fn exchange(
        &mut self,
        _: &str,
        _: &[u8],
        _: Option<&()>,
        _: Instant,
    ) -> Result<Reply, DeliveryError> {
        Ok(Reply {
            status: Some(200),
            content_type: Some("application/json".into()),
            body: br#"{"jsonrpc":"2.0","id":"evt_bench","result":{"protocolVersion":"draft","effects":[]}}"#.to_vec(),
        })
    }
    fn interrupted(&self) -> bool {
        false
    }
    fn retry_after(&mut self, _: &str, _: u32, _: Instant) -> bool {
        false
    }

    fn sha256(&self, bytes: &[u8]) -> String {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(bytes))
    }
}

fn main() {
    let engine = Engine::load(REGISTRATION).expect("valid registration");
    let mut host = Instant0(std::time::Instant::now());
    let effects = [ahp_interceptor::effect::EffectKind::Deny];
    let n = 20_000;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = std::time::Instant::now();
        let settled = engine
            .intercept(&mut host, EVENT, &effects, None)
            .expect("valid call");
        let audit = serde_json::to_string(&settled.record()).expect("a record serializes");
        samples.push(t.elapsed());
        assert!(audit.contains("no-objection"));
    }
    samples.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("native protocol logic of one hook call (instant host), {n} calls");
    println!(
        "median {:.1} µs, p99 {:.1} µs",
        us(samples[n / 2]),
        us(samples[n * 99 / 100])
    );
}
