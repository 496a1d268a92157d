//! `response::decode` on arbitrary bytes as a stdio reply (no status, so every byte goes
//! to the body parser) to request `evt1`, every effect of `tool.before` advertised with
//! every option: every input is the effect list or exactly one failure, never a panic.
#![no_main]

use ahp_interceptor::events;
use ahp_interceptor::host_api::Reply;
use ahp_interceptor::response;
use ahp_interceptor::vocab::InterceptableEvent;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let reply = Reply {
        status: None,
        content_type: None,
        body: data.to_vec(),
    };
    let every_effect = events::full(InterceptableEvent::ToolBefore);
    let _ = response::decode(&reply, "evt1", &every_effect);
});
