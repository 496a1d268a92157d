//! A tool call's MCP descriptor (digest §3.3; execution-event.schema.json `$defs/mcp`):
//! which server a call goes to, and how the harness reaches it.
//!
//! Gemini CLI says so at every MCP tool call, in `mcp_context` (gemini-cli
//! `packages/core/src/hooks/types.ts` `McpToolContext`: `server_name`, `tool_name`, and
//! `command`/`args`/`cwd` for a stdio server, `url` for an SSE or streamable-HTTP one,
//! `tcp` for a WebSocket one), so its descriptor is the harness's own (`provenance:
//! runtime`). The other harnesses say nothing: a tool named by the `mcp__server__tool`
//! convention gets a descriptor inferred from its name, its connection undisclosed.
//!
//! A descriptor never carries a credential (digest §3.3). The adapter cannot tell a
//! secret among a stdio server's arguments, so they are a gap; a URL loses its user
//! info, query and fragment. The whole payload, `mcp_context` included, is still in
//! `native` for a subscription that sets `includeNative`.

use serde_json::{json, Map, Value};

/// The transport of an MCP server whose transport the harness does not name: an
/// extension word (`^_.+`), since a connection must name one.
const UNDISCLOSED_TRANSPORT: &str = "_undisclosed";

/// A WebSocket server's transport (Gemini's `tcp`): an extension word, the protocol
/// naming none.
const WEBSOCKET_TRANSPORT: &str = "_websocket";

/// Why a stdio server's arguments are left out.
const ARGS_LEFT_OUT: &str = "left out: an argument may carry a credential (the whole \
    payload is in native, for a subscription that sets includeNative)";

/// The descriptor of the tool `name`: from `context` (the harness's own account of the
/// server) when it names the server and the tool, else inferred from the name; none for
/// a native tool.
pub fn descriptor(name: &str, context: Option<&Map<String, Value>>) -> Option<Value> {
    let text = |key: &str| {
        context
            .and_then(|context| context.get(key))
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    if let (Some(context), Some(server), Some(tool)) =
        (context, text("server_name"), text("tool_name"))
    {
        return Some(json!({
            "server": {"id": server},
            "toolName": tool,
            "provenance": "runtime",
            "connection": connection(context),
        }));
    }
    if context.is_some() {
        tracing::warn!(
            "mcp_context names no server_name and tool_name: the descriptor is inferred from the tool name"
        );
    }
    let (server, tool) = name.strip_prefix("mcp__")?.split_once("__")?;
    Some(json!({
        "server": {"id": server},
        "toolName": tool,
        "provenance": "inferred",
        "connection": undisclosed(),
    }))
}

/// The connection `context` describes: a stdio server by its command, an HTTP one by its
/// URL, a WebSocket one by its address; undisclosed when it names none of them.
fn connection(context: &Map<String, Value>) -> Value {
    let text = |key| text(context, key);
    if let Some(command) = text("command") {
        let mut connection = json!({"transport": "stdio", "command": command});
        let mut gaps = vec![gap("args", ARGS_LEFT_OUT)];
        match text("cwd") {
            Some(cwd) => connection["cwd"] = json!(cwd),
            None => gaps.push(gap("cwd", "the harness does not say")),
        }
        connection["gaps"] = json!(gaps);
        return connection;
    }
    if let Some(url) = text("url") {
        // Gemini names an SSE server's `url` and a streamable-HTTP server's `httpUrl`
        // alike, as `url`: which of the two transports it is, it does not say.
        return json!({
            "transport": UNDISCLOSED_TRANSPORT,
            "addressForm": "url",
            "address": without_credentials(url),
            "gaps": [gap("transport", "sse or http: the harness does not say which")],
        });
    }
    if let Some(address) = text("tcp") {
        return json!({"transport": WEBSOCKET_TRANSPORT, "addressForm": "tcp", "address": address});
    }
    undisclosed()
}

/// A connection of which nothing is known: the undisclosed transport, with every member
/// of its location, and the transport itself, named as gaps. Valid, and plain that
/// nothing is known.
fn undisclosed() -> Value {
    json!({
        "transport": UNDISCLOSED_TRANSPORT,
        "gaps": [
            gap("transport", "the harness does not say; _undisclosed stands for it"),
            gap("addressForm", "the harness does not say"),
            gap("address", "the harness does not say"),
        ],
    })
}

/// `key` of `object`, when it is a non-empty string.
fn text<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

fn gap(path: &str, reason: &str) -> Value {
    json!({"path": path, "reason": reason})
}

/// `url` without the parts that may carry a credential: user info (`user:password@`),
/// the query (`?token=…`) and the fragment.
fn without_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    match scheme {
        Some(scheme) => format!("{scheme}://{host}{path}"),
        None => format!("{host}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    fn gaps(connection: &Value) -> Vec<&str> {
        connection["gaps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|gap| gap["path"].as_str())
            .collect()
    }

    #[test]
    fn a_tool_named_by_the_convention_has_an_inferred_descriptor() {
        let mcp = descriptor("mcp__github__create_issue", None).expect("an MCP tool");
        assert_eq!(mcp["server"], json!({"id": "github"}));
        assert_eq!(mcp["toolName"], "create_issue");
        assert_eq!(mcp["provenance"], "inferred");
        // A transport is required; the undisclosed one names its location as gaps.
        let connection = &mcp["connection"];
        assert_eq!(connection["transport"], "_undisclosed");
        assert_eq!(gaps(connection), ["transport", "addressForm", "address"]);
        assert_eq!(descriptor("Bash", None), None);
        assert_eq!(descriptor("mcp__nameless", None), None);
    }

    /// Gemini's account of a stdio server: its command and working directory, never its
    /// arguments (a gap says why), and none of its environment.
    #[test]
    fn a_stdio_server_the_harness_names_is_described_without_its_arguments() {
        let stdio = context(json!({"server_name": "files", "tool_name": "read",
            "command": "/usr/bin/mcp-files", "args": ["--token", "s3cret"], "cwd": "/srv"}));
        let mcp = descriptor("read", Some(&stdio)).expect("an MCP tool");
        assert_eq!(mcp["server"], json!({"id": "files"}));
        assert_eq!(mcp["toolName"], "read");
        assert_eq!(mcp["provenance"], "runtime");
        let connection = &mcp["connection"];
        assert_eq!(connection["transport"], "stdio");
        assert_eq!(connection["command"], "/usr/bin/mcp-files");
        assert_eq!(connection["cwd"], "/srv");
        assert_eq!(gaps(connection), ["args"]);
        assert!(!mcp.to_string().contains("s3cret"), "{mcp}");
        let no_cwd = context(json!({"server_name": "files", "tool_name": "read",
            "command": "mcp-files"}));
        let connection = &descriptor("read", Some(&no_cwd)).unwrap()["connection"];
        assert_eq!(gaps(connection), ["args", "cwd"]);
    }

    /// A URL, whether Gemini's server is SSE or streamable HTTP (it does not say which),
    /// without user info, query or fragment; a WebSocket server by its address.
    #[test]
    fn a_remote_server_is_described_by_an_address_without_credentials() {
        let remote = context(json!({"server_name": "docs", "tool_name": "search",
            "url": "https://bob:pw@mcp.example:8443/v1/sse?api_key=s3cret#top"}));
        let connection = &descriptor("search", Some(&remote)).unwrap()["connection"];
        assert_eq!(connection["transport"], "_undisclosed");
        assert_eq!(connection["addressForm"], "url");
        assert_eq!(connection["address"], "https://mcp.example:8443/v1/sse");
        assert_eq!(gaps(connection), ["transport"]);
        let socket = context(json!({"server_name": "ws", "tool_name": "t",
            "tcp": "localhost:9000"}));
        let connection = &descriptor("t", Some(&socket)).unwrap()["connection"];
        assert_eq!(
            *connection,
            json!({"transport": "_websocket", "addressForm": "tcp", "address": "localhost:9000"})
        );
        let bare = context(json!({"server_name": "s", "tool_name": "t"}));
        let connection = &descriptor("t", Some(&bare)).unwrap()["connection"];
        assert_eq!(gaps(connection), ["transport", "addressForm", "address"]);
    }

    /// A context that does not name both the server and its tool is not the harness's
    /// account of a server: the name decides, as for a harness that sends none.
    #[test]
    fn a_context_without_server_and_tool_falls_back_to_the_name() {
        let partial = context(json!({"server_name": "files", "command": "x"}));
        assert_eq!(descriptor("read", Some(&partial)), None);
        let mcp = descriptor("mcp__files__read", Some(&partial)).unwrap();
        assert_eq!(mcp["provenance"], "inferred");
    }

    #[test]
    fn credentials_are_cut_from_urls() {
        for (url, cut) in [
            ("https://mcp.example/sse", "https://mcp.example/sse"),
            ("http://u@h:1", "http://h:1"),
            ("http://h/p@q?x=1", "http://h/p@q"),
            ("h/p#f", "h/p"),
        ] {
            assert_eq!(without_credentials(url), cut, "{url}");
        }
    }
}
