//! Wall time of one whole `ahp intercept` process — what a command-hook harness pays per
//! tool call — next to `curl` POSTing the same request to the same loopback backend.
//! Three kinds of process, interleaved round by round (the order goes through all six
//! permutations, so each kind follows each other equally often over six rounds): `ahp intercept` with a warm compile cache, `ahp intercept` with an
//! empty cache directory (the first process after an install: compiles and stores), and
//! `curl`. Reports median and p99 in ms over N rounds (default 30; below 100 rounds the
//! p99 is the slowest run, and labelled so), and warm / curl.
//!
//! `cargo bench -p ahp-tests --bench cold_start` (optionally `-- N`)
//!
//! The backend answers no effect; it runs in this process on two runtime threads.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ahp_tests::fault_backend::{Behaviour, FaultBackend};
use ahp_tests::support::{
    ahp_binary, bench_count, event, median_p99_us, one_json_line, registration, Http,
};

fn main() {
    let n = bench_count(30);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let backend = runtime.block_on(FaultBackend::start(vec![Behaviour::NoEffect]));
    let files = tempfile::tempdir().expect("a temporary directory");
    let dir = files.path();
    std::fs::write(
        dir.join("registration.json"),
        registration(&[Http::new("dev.ahp.bench", backend.url())]),
    )
    .expect("write the registration");
    std::fs::write(dir.join("event.json"), event("evt_bench")).expect("write the event");
    let warm = dir.join("warm-cache");

    // The first warm run fills the cache and shows the call is a real allow; its request
    // is what curl sends, with the same content type.
    let output = intercept(dir, &warm).output().expect("run ahp intercept");
    assert!(output.status.success(), "{output:?}");
    let record = one_json_line(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(record["decidedBy"], "no-objection", "{record}");
    let request = backend.requests().pop().expect("the backend was asked");
    std::fs::write(dir.join("request.json"), &request.body).expect("write the request");
    let content_type = request.header_values("content-type").join(", ");
    let url = backend.url();
    let curl = || {
        let mut command = Command::new("curl");
        command
            .args([
                "--silent",
                "--show-error",
                "--fail",
                "--output",
                "/dev/null",
            ])
            .args(["--header", &format!("content-type: {content_type}")])
            .arg("--data-binary")
            .arg(format!("@{}", dir.join("request.json").display()))
            .arg(&url);
        command
    };

    /// Every order of the three kinds: each follows each other, and the empty-cache
    /// process (which compiles and stores) precedes each other, equally often.
    const ORDERS: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let mut times: [Vec<Duration>; 3] = Default::default();
    for round in 0..n {
        for kind in ORDERS[round % ORDERS.len()] {
            let mut command = match kind {
                0 => intercept(dir, &warm),
                1 => intercept(dir, &dir.join(format!("empty-cache-{round}"))),
                _ => curl(),
            };
            times[kind].push(run(&mut command));
        }
    }
    assert_eq!(
        backend.requests().len(),
        3 * n + 1,
        "every process reached the backend"
    );

    let [warm_times, empty_times, curl_times] = &mut times;
    let (warm_med, warm_p99) = median_p99_us(warm_times);
    let (empty_med, empty_p99) = median_p99_us(empty_times);
    let (curl_med, curl_p99) = median_p99_us(curl_times);
    println!("{n} rounds, interleaved; wall time of one process, spawn to exit");
    // Below 100 rounds the 99th percentile is the slowest run: named so.
    let tail = if n < 100 { "worst ms" } else { "p99 ms" };
    println!("{:<40} {:>10} {:>10}", "", "median ms", tail);
    for (name, med, p99) in [
        ("ahp intercept, warm compile cache", warm_med, warm_p99),
        (
            "ahp intercept, empty cache (first run)",
            empty_med,
            empty_p99,
        ),
        ("curl POST of the same request", curl_med, curl_p99),
    ] {
        println!("{name:<40} {:>10.1} {:>10.1}", med / 1e3, p99 / 1e3);
    }
    println!("warm / curl (median): {:.1}x", warm_med / curl_med);
    println!("empty / curl (median): {:.1}x", empty_med / curl_med);
}

/// `ahp intercept` of the bench event with its compile cache in `cache`.
fn intercept(dir: &Path, cache: &Path) -> Command {
    let mut command = Command::new(ahp_binary());
    command
        .arg("intercept")
        .arg("--registration")
        .arg(dir.join("registration.json"))
        .arg("--event")
        .arg(dir.join("event.json"))
        .env("AHP_CACHE_DIR", cache)
        .env_remove("AHP_LOG");
    command
}

/// Spawn to exit; the process must succeed (allow, or curl's 200).
fn run(command: &mut Command) -> Duration {
    let started = Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .expect("spawn the process");
    let elapsed = started.elapsed();
    assert!(status.success(), "{command:?}: {status}");
    elapsed
}
