//! The work of one decision, for an instruction counter: on this project's shared
//! 2-core machines wall time moves by ±30 % between runs, instruction counts do not.
//!
//! `cargo bench -p ahp-host --bench call_cost -- MODE N [--perfmap]` runs N decisions
//! at concurrency 8 from a current-thread harness against a loopback backend on its own
//! thread (as `tests/harness-bench`), after 1,000 warm-up hook calls, and prints the
//! harness thread's CPU time per decision, and what the host's SHA-256 of the request
//! costs natively (see [`host_sha256_cost`]). MODE is `hook` (through the component),
//! `in-process` (the same, the backend an injected transport that answers at once: the
//! component and host without the network) or `raw` (keep-alive POSTs of the component's
//! own request bytes).
//!
//! Instructions per decision, both threads: run the built binary (the path cargo prints)
//! under `valgrind --tool=callgrind --smc-check=all-non-file` with N and with 2N; the
//! difference of the two totals over N. `--perfmap` has wasmtime write
//! `/tmp/perf-PID.map`, which maps the JIT addresses callgrind reports to the
//! component's functions; with `strip = true` in the root Cargo.toml's `[profile.guest]`
//! they are numbers (`wasm[0]::function[191]`), with `strip = false` their Rust names. The Engine uses wasmtime's on-demand allocator, because valgrind
//! cannot reserve the pooling allocator's address space; the component's code is the
//! same.

#[allow(dead_code)] // shared by the benches; this one uses a part
mod loopback;

use ahp_host::wasmtime::{Config, Engine, ProfilingStrategy};
use ahp_host::{InterceptorBuilder, Options, Transport};
use std::sync::Arc;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args
        .iter()
        .find(|a| ["hook", "in-process", "raw"].contains(&a.as_str()))
        .cloned();
    let n = args.iter().filter_map(|a| a.parse::<usize>().ok()).next();
    let (Some(mode), Some(n)) = (mode, n) else {
        eprintln!("usage: call_cost hook|in-process|raw N [--perfmap]");
        std::process::exit(2);
    };
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.concurrency_support(false);
    if args.iter().any(|a| a == "--perfmap") {
        config.profiler(ProfilingStrategy::PerfMap);
    }
    let engine = Engine::new(&config).expect("an Engine");
    let addr = loopback::backend_thread();
    let mut options = Options::default();
    if mode == "in-process" {
        let answer: Arc<dyn Transport> = Arc::new(loopback::NoObjection);
        options.transports.insert("dev.ahp.bench".into(), answer);
    }
    let interceptor = InterceptorBuilder::new()
        .engine(&engine)
        .options(options)
        .build(&loopback::registration(&format!("http://{addr}/hooks")))
        .await
        .expect("build the interceptor");
    for _ in 0..1_000 {
        loopback::hook(&interceptor).await;
    }
    let mut connections = Vec::new();
    if mode == "raw" {
        for _ in 0..loopback::CONCURRENCY {
            connections.push(loopback::connect(addr).await);
        }
    }
    let body = loopback::first_body();
    println!("{}", host_sha256_cost(&body));
    let before = thread_cpu_seconds();
    let rate = match mode.as_str() {
        "raw" => loopback::raw_throughput(&mut connections, addr, &body, n).await,
        _ => loopback::hook_throughput(&interceptor, n).await,
    };
    let cpu_us = (thread_cpu_seconds() - before) / n as f64 * 1e6;
    println!("{mode}: {n} decisions, {rate:.0}/s, harness thread CPU {cpu_us:.1} µs per decision");
    interceptor.shutdown_async().await;
}

/// What the host's `delivery.sha256` costs natively for the request, which valgrind
/// cannot show: it hides the SHA-NI instructions, so under callgrind sha2 takes its
/// portable code path.
fn host_sha256_cost(request: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const ROUNDS: u32 = 100_000;
    let start = std::time::Instant::now();
    for _ in 0..ROUNDS {
        std::hint::black_box(Sha256::digest(std::hint::black_box(request)));
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(ROUNDS);
    format!(
        "host SHA-256 of the {}-byte request: {ns:.0} ns",
        request.len()
    )
}

/// CPU time of the calling thread so far.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
