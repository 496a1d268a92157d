// What each fuzz target checks of one input, in one place: the targets
// (`fuzz_targets/*.rs`, nightly and libFuzzer) and the seed replay test that runs in CI
// (`guest/tests/fuzz_seeds.rs`) both `include!` this file.

/// `registration::parse` on arbitrary UTF-8: every input is a registration or a list of
/// problems, never a panic.
pub fn registration(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ahp_interceptor::registration::parse(text);
    }
}

/// The event parser (both entry points) on arbitrary UTF-8, never a panic; and strict
/// JSON reads exactly as serde_json wherever serde_json alone would have an answer, but
/// for the integer `-0` ([`alike`]): what strict accepts serde_json reads the same, what
/// serde_json rejects strict rejects.
pub fn event(data: &[u8]) {
    use ahp_interceptor::event::Event;
    use ahp_interceptor::json;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Event::parse_tool_before(text);
    let _ = Event::parse_any(text);
    match (json::parse(text), serde_json::from_str::<serde_json::Value>(text)) {
        (Ok(strict), Ok(lenient)) => assert!(alike(&strict, &lenient), "{strict} / {lenient}"),
        (Ok(_), Err(e)) => panic!("strict accepted what serde_json rejects: {e}"),
        (Err(json::Error::Syntax(_)), Ok(_)) => {
            panic!("strict found a syntax error serde_json did not")
        }
        // A repeat, a number no double holds, or too many values says nothing about the
        // rest of the text.
        (Err(json::Error::Duplicate(_) | json::Error::Inexact(_) | json::Error::TooMany), _)
        | (Err(json::Error::Syntax(_)), Err(_)) => {}
    }
}

/// Whether `strict` is `lenient` but where the text said the integer `-0`: strict reads
/// it as the integer 0, serde_json as the float -0.0 (written back `-0.0`, which a reader
/// of integers refuses).
pub fn alike(strict: &serde_json::Value, lenient: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (strict, lenient) {
        (Value::Number(s), Value::Number(l)) => {
            let minus_zero = l.as_f64().is_some_and(|l| l == 0.0 && l.is_sign_negative());
            s == l || s.as_u64() == Some(0) && minus_zero
        }
        (Value::Array(s), Value::Array(l)) => {
            s.len() == l.len() && s.iter().zip(l).all(|(s, l)| alike(s, l))
        }
        (Value::Object(s), Value::Object(l)) => {
            s.len() == l.len() && s.iter().all(|(k, s)| l.get(k).is_some_and(|l| alike(s, l)))
        }
        _ => strict == lenient,
    }
}

/// `response::decode` on arbitrary bytes as a stdio reply (no status, so every byte goes
/// to the body parser) to request `evt1`, every effect of `tool.before` advertised with
/// every option: every input is the effect list or exactly one failure, never a panic.
pub fn response(data: &[u8]) {
    use ahp_interceptor::host_api::Reply;
    use ahp_interceptor::vocab::InterceptableEvent;
    let reply = Reply {
        status: None,
        content_type: None,
        body: data.to_vec(),
    };
    let every_effect = ahp_interceptor::events::full(InterceptableEvent::ToolBefore);
    let _ = ahp_interceptor::response::decode(&reply, "evt1", &every_effect);
}
