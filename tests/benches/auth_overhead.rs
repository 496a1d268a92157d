//! What a cached OAuth token adds to a hook call: the same backend behaviour called with
//! no authentication and with an OAuth client-credentials binding whose token is already
//! cached, interleaved call by call so both see the same machine. Reports median and p99
//! per kind and the difference of the medians.
//!
//! `cargo bench -p ahp-tests --bench auth_overhead` (optionally `-- N`, default 2000)

use ahp_host::{Decision, EffectKind, Interceptor, Options};
use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::oauth_server::{OAuthServer, CLIENT_ID};
use ahp_tests::pki::Pki;
use ahp_tests::support::{bench_count, event, median_p99_us, registration, Http};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = bench_count(2_000);
    let pki = Pki::generate();
    let roots = pki.trust_roots_file();
    let server = OAuthServer::start(&pki, "bench-secret", 3600).await;
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "bench-secret").unwrap();
    let plain_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let oauth_backend = FaultBackend::start(vec![Behaviour::NoEffect]).await;
    let options = Options {
        trust_roots: Some(roots.path().to_path_buf()),
        ..Options::default()
    };
    let plain = Interceptor::new(
        &registration(&[Http::new("dev.ahp.plain", plain_backend.url())]),
        options.clone(),
    )
    .await
    .unwrap();
    let oauth = Interceptor::new(
        &registration(&[Http::new("dev.ahp.oauth", oauth_backend.url()).authentication(json!({
            "type": "oauth", "issuer": server.issuer(), "resource": "https://policy.example.com",
            "clientId": CLIENT_ID, "flow": "client_credentials", "scopes": ["hooks"],
            "clientSecretRef": format!("file:{}", secret.path().display())
        }))]),
        options,
    )
    .await
    .unwrap();
    for i in 0..200 {
        call(&plain, i).await;
        call(&oauth, i).await;
    }
    let (mut plain_times, mut oauth_times) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        plain_times.push(call(&plain, i).await);
        oauth_times.push(call(&oauth, i).await);
    }
    assert_eq!(
        server.issued().len(),
        1,
        "every measured call used the cached token"
    );
    let (plain_median, plain_p99) = median_p99_us(&mut plain_times);
    let (oauth_median, oauth_p99) = median_p99_us(&mut oauth_times);
    println!("hook call latency, {n} calls each, interleaved");
    println!(
        "{:<28} {:>12} {:>10}",
        "authentication", "median µs", "p99 µs"
    );
    println!("{:<28} {plain_median:>12.1} {plain_p99:>10.1}", "none");
    println!(
        "{:<28} {oauth_median:>12.1} {oauth_p99:>10.1}",
        "OAuth, cached token"
    );
    println!(
        "added by the cached token: {:.1} µs (median)",
        oauth_median - plain_median
    );
}

async fn call(interceptor: &Interceptor, i: usize) -> Duration {
    let started = Instant::now();
    let settled = interceptor
        .intercept(&event(&format!("evt_{i}")), &[EffectKind::Deny], None)
        .await
        .expect("call");
    let took = started.elapsed();
    assert_eq!(settled.decision, Decision::Allow, "{}", settled.record);
    took
}
