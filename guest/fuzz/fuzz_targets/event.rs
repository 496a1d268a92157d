//! The event parser (both entry points) on arbitrary UTF-8, never a panic; and strict
//! JSON reads exactly as serde_json wherever serde_json alone would have an answer: what
//! strict accepts serde_json reads the same, what serde_json rejects strict rejects.
#![no_main]

use ahp_interceptor::event::Event;
use ahp_interceptor::json;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Event::parse_tool_before(text);
    let _ = Event::parse_any(text);
    match (json::parse(text), serde_json::from_str::<Value>(text)) {
        (Ok(strict), Ok(lenient)) => assert_eq!(strict, lenient),
        (Ok(_), Err(e)) => panic!("strict accepted what serde_json rejects: {e}"),
        (Err(json::Error::Syntax(_)), Ok(_)) => {
            panic!("strict found a syntax error serde_json did not")
        }
        // A repeat, a number no double holds, or too many values says nothing about the
        // rest of the text.
        (Err(json::Error::Duplicate(_) | json::Error::Inexact(_) | json::Error::TooMany), _)
        | (Err(json::Error::Syntax(_)), Err(_)) => {}
    }
});
