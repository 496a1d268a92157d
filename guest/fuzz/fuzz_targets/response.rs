//! `response::decode` on arbitrary bytes as a stdio reply (no status, so every byte goes
//! to the body parser) to request `evt1`, every effect advertised: every input is the
//! effect list or exactly one failure, never a panic.
#![no_main]

use ahp_interceptor::effect::EffectKind;
use ahp_interceptor::host_api::Reply;
use ahp_interceptor::response;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let reply = Reply {
        status: None,
        content_type: None,
        body: data.to_vec(),
    };
    let _ = response::decode(&reply, "evt1", EffectKind::ALL);
});
