//! `registration::parse` on arbitrary UTF-8: every input is a registration or a list of
//! problems, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ahp_interceptor::registration::parse(text);
    }
});
