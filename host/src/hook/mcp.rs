//! A tool call's MCP descriptor (digest §3.3; execution-event.schema.json `$defs/mcp`):
//! which server a call goes to, and how the harness reaches it.
//!
//! Gemini CLI says so at every MCP tool call, in `mcp_context` (gemini-cli
//! `packages/core/src/hooks/types.ts` `McpToolContext`: `server_name`, `tool_name`, and
//! from the server's configuration `url` (its `url`, else its `httpUrl`) and `command`,
//! `args`, `cwd`), so its descriptor is the harness's own (`provenance: runtime`). Gemini
//! connects to a URL before it starts a command, so a context naming both is a remote
//! server. The other harnesses say nothing: a tool named by the `mcp__server__tool`
//! convention gets a descriptor inferred from its name, its connection undisclosed.
//!
//! A descriptor never carries a credential (digest §3.3), and the adapter cannot tell
//! one apart: a remote server is named by its URL's origin alone (scheme, host, port;
//! a path can hold a token as well as a query or user info can: the address is a URL
//! cut to its origin, `addressForm: "url"`), and a stdio server's arguments, when it
//! has any, are a gap. The whole payload, `mcp_context` included, is
//! still in `native` for a subscription that sets `includeNative`.

use super::event::{gap, UNSAID};
use serde_json::{json, Map, Value};

/// The transport of an MCP server whose transport the harness does not name: an
/// extension word (`^_.+`), since a connection must name one.
const UNDISCLOSED_TRANSPORT: &str = "_undisclosed";

/// What the harness leaves unsaid of a remote server: which transport, and which of two
/// URLs (gemini-cli `extractMcpContext` names `url ?? httpUrl`, `createTransport`
/// connects to `httpUrl` first).
const TRANSPORT_UNSAID: &str = "sse or http: the harness does not say which; with both \
    url and httpUrl configured, it names url but connects to httpUrl";

/// Why a stdio server's arguments are left out.
const ARGS_LEFT_OUT: &str = "left out: an argument may carry a credential (the whole \
    payload is in native, for a subscription that sets includeNative)";

/// The descriptor of the tool `name`: the server `context` (the harness's own account)
/// names, else the one the name names by convention; none for a native tool. The
/// provenance is `runtime` only when the harness named both the server and its tool.
pub fn descriptor(name: &str, context: Option<&Map<String, Value>>) -> Option<Value> {
    if let Some((context, server)) = context.and_then(|c| Some((c, text(c, "server_name")?))) {
        let (tool, provenance) = match text(context, "tool_name") {
            Some(tool) => (tool, "runtime"),
            None => (name, "inferred"),
        };
        return Some(described(server, tool, provenance, connection(context)));
    }
    if context.is_some() {
        tracing::warn!(
            "mcp_context names no server_name: the descriptor is inferred from the tool name"
        );
    }
    let (server, tool) = name.strip_prefix("mcp__")?.split_once("__")?;
    if server.is_empty() || tool.is_empty() {
        return None;
    }
    Some(described(server, tool, "inferred", undisclosed()))
}

/// The descriptor of `tool` at `server`, reached by `connection`.
fn described(server: &str, tool: &str, provenance: &str, connection: Value) -> Value {
    json!({
        "server": {"id": server},
        "toolName": tool,
        "provenance": provenance,
        "connection": connection,
    })
}

/// The connection `context` describes: a remote server by its URL's origin, a stdio one
/// by its command; undisclosed when it names neither.
fn connection(context: &Map<String, Value>) -> Value {
    if let Some(url) = text(context, "url") {
        // Gemini names an SSE server's `url` and a streamable-HTTP server's `httpUrl`
        // alike, as `url`: which of the two transports it is, it does not say.
        let mut connection = json!({"transport": UNDISCLOSED_TRANSPORT, "addressForm": "url"});
        let mut gaps = vec![gap("transport", TRANSPORT_UNSAID)];
        match origin(url) {
            Some(origin) => connection["address"] = json!(origin),
            None => gaps.push(gap("address", "the harness's URL has no http(s) origin")),
        }
        connection["gaps"] = json!(gaps);
        return connection;
    }
    if let Some(command) = text(context, "command") {
        let mut connection = json!({"transport": "stdio", "command": command});
        let mut gaps = Vec::new();
        // Gemini starts the command with no arguments when it names none.
        match context.get("args") {
            None | Some(Value::Null) => connection["args"] = json!([]),
            Some(Value::Array(args)) if args.is_empty() => connection["args"] = json!([]),
            Some(_) => gaps.push(gap("args", ARGS_LEFT_OUT)),
        }
        match text(context, "cwd") {
            Some(cwd) => connection["cwd"] = json!(cwd),
            None => gaps.push(gap("cwd", UNSAID)),
        }
        if !gaps.is_empty() {
            connection["gaps"] = json!(gaps);
        }
        return connection;
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
            gap("transport", &format!("{UNSAID}; _undisclosed stands for it")),
            gap("addressForm", UNSAID),
            gap("address", UNSAID),
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

/// The origin of an `http` or `https` `url` (`scheme://host[:port]`, no default port),
/// read as the WHATWG URL standard reads it, as Gemini (Node's `URL`) does; none for a
/// URL of another scheme (Gemini reaches a remote server over HTTP only), or that does
/// not parse.
fn origin(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    match url.origin() {
        url::Origin::Tuple(scheme, ..) if ["http", "https"].contains(&scheme.as_str()) => {
            Some(url.origin().ascii_serialization())
        }
        _ => None,
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
        // A name without both parts is no MCP tool: an empty server id or tool name
        // would make the event invalid, and the call a denial.
        for native in ["Bash", "mcp__nameless", "mcp____t", "mcp__s__"] {
            assert_eq!(descriptor(native, None), None, "{native}");
        }
    }

    /// Gemini's account of a stdio server: its command and working directory, and its
    /// arguments only when it has none (a gap says why otherwise).
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
        for args in [json!(null), json!([])] {
            let bare = context(json!({"server_name": "files", "tool_name": "read",
                "command": "mcp-files", "args": args}));
            let connection = &descriptor("read", Some(&bare)).unwrap()["connection"];
            assert_eq!(connection["args"], json!([]));
            assert_eq!(gaps(connection), ["cwd"]);
        }
        // Nothing undisclosed: no gaps at all (an empty list is refused by the checker).
        let whole = context(json!({"server_name": "files", "tool_name": "read",
            "command": "mcp-files", "cwd": "/srv"}));
        let connection = &descriptor("read", Some(&whole)).unwrap()["connection"];
        assert_eq!(
            *connection,
            json!({"transport": "stdio", "command": "mcp-files", "args": [], "cwd": "/srv"})
        );
    }

    /// A remote server by its URL's origin alone, whether it is SSE or streamable HTTP
    /// (Gemini does not say which), before any command: Gemini connects to a URL first.
    #[test]
    fn a_remote_server_is_described_by_its_origin() {
        let remote = context(json!({"server_name": "docs", "tool_name": "search",
            "url": "https://bob:pw@mcp.example:8443/s/tok-s3cret/sse?api_key=k3y#top",
            "command": "ignored"}));
        let connection = &descriptor("search", Some(&remote)).unwrap()["connection"];
        assert_eq!(connection["transport"], "_undisclosed");
        assert_eq!(connection["addressForm"], "url");
        assert_eq!(connection["address"], "https://mcp.example:8443");
        assert_eq!(gaps(connection), ["transport"]);
        let unparsable = context(json!({"server_name": "docs", "tool_name": "search",
            "url": "?x"}));
        let connection = &descriptor("search", Some(&unparsable)).unwrap()["connection"];
        assert!(connection.get("address").is_none(), "{connection}");
        assert_eq!(gaps(connection), ["transport", "address"]);
        let bare = context(json!({"server_name": "s", "tool_name": "t"}));
        let connection = &descriptor("t", Some(&bare)).unwrap()["connection"];
        assert_eq!(gaps(connection), ["transport", "addressForm", "address"]);
    }

    /// A context naming the server but not its tool: the server is the harness's, the
    /// tool its native name, and the descriptor inferred. One naming no server is not
    /// the harness's account of one: the name decides, as for a harness that sends none.
    #[test]
    fn a_partial_context_is_inferred_from() {
        let no_tool = context(json!({"server_name": "files", "command": "x"}));
        let mcp = descriptor("mcp_files_read", Some(&no_tool)).unwrap();
        assert_eq!(mcp["server"], json!({"id": "files"}));
        assert_eq!(mcp["toolName"], "mcp_files_read");
        assert_eq!(mcp["provenance"], "inferred");
        let no_server = context(json!({"tool_name": "read"}));
        assert_eq!(descriptor("read", Some(&no_server)), None);
        let mcp = descriptor("mcp__files__read", Some(&no_server)).unwrap();
        assert_eq!(mcp["provenance"], "inferred");
    }

    /// What a URL parser as lenient as Gemini's (Node's `URL`) reads as user info, a path
    /// or a query never reaches the origin, however the URL is written.
    #[test]
    fn an_origin_holds_no_user_info_path_or_query() {
        for (url, cut) in [
            ("https://mcp.example/sse", Some("https://mcp.example")),
            ("http://u@h:1", Some("http://h:1")),
            ("https:/u:p@h/sse", Some("https://h")),
            ("https:\\/u:p@h/x", Some("https://h")),
            ("https:\t//u:p@h/", Some("https://h")),
            ("https://h\\p@q/", Some("https://h")),
            ("https://u:p@[::1]:8/x", Some("https://[::1]:8")),
            ("https://h/p@q?x=1", Some("https://h")),
            ("https://h:443/x", Some("https://h")),
            (
                "http://B\u{fc}cher.example:8080/",
                Some("http://xn--bcher-kva.example:8080"),
            ),
            ("?x", None),
            ("file:///etc/passwd", None),
            ("file://server/share", None),
            ("ws://u:p@h/x", None),
            ("foo://u:p@h:9/x", None),
        ] {
            assert_eq!(origin(url).as_deref(), cut, "{url}");
        }
    }
}
