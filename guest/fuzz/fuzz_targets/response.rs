//! The `response` target: see `bodies::response` (shared with the seed replay test in CI).
#![no_main]

// Each target calls one of the bodies.
#[allow(dead_code)]
mod bodies {
    include!("../bodies.rs");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::response(data));
