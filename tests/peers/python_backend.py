"""An AHP backend built on the official Python SDK (`agenthooksprotocol`), for interop tests.

Usage:
  python_backend.py http [LOG]   serve over HTTP on 127.0.0.1 with an OS-assigned port;
                                 the first stdout line is `PORT <n>`, the second
                                 `SDK <version>` (the agenthooksprotocol distribution
                                 loaded). Exits when its stdin reaches EOF. If
                                 AHP_PEER_TOKEN is set, requests without
                                 `Authorization: Bearer <token>` get 401.
  python_backend.py stdio [LOG]  serve newline-delimited JSON-RPC over stdin/stdout.

With LOG, every observe notification appends `OBSERVED <event type> <event id>` to that
file once the SDK has validated it and called the observe handler.

Policy, by what tool.input.command of a tool.before contains:
  "rm -rf"   deny (REASON)
  "git push" ask
  "sudo "    modify: replace the input with the command minus "sudo "
  "crash"    the callback raises (the SDK answers a JSON-RPC error)
  otherwise  no effect.
"""

import hmac
import importlib.metadata
import os
import socket
import sys

import anyio
from agenthooksprotocol import effect
from agenthooksprotocol.server import asgi, hooks, stdio

REASON = "python peer denies rm -rf"


def tool_before(ctx: hooks.ToolBeforeContext) -> hooks.ToolBeforeReply:
    command = ctx.raw["params"]["event"].get("tool", {}).get("input", {}).get("command")
    if not isinstance(command, str):
        return hooks.ToolBeforeReply()
    if "rm -rf" in command:
        return hooks.ToolBeforeReply(effects=(effect.DenyEffect(reason=REASON),))
    if "git push" in command:
        return hooks.ToolBeforeReply(effects=(effect.AskEffect(),))
    if "sudo " in command:
        rewritten = command.replace("sudo ", "")
        return hooks.ToolBeforeReply(effects=(effect.replace_input({"command": rewritten}),))
    if "crash" in command:
        raise RuntimeError("python peer callback crashed")
    return hooks.ToolBeforeReply()


def observer(log: str):
    """An observe handler appending `OBSERVED <type> <id>` to `log` for each notification."""

    def observed(ctx) -> None:
        event = ctx.raw["params"]["event"]
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"OBSERVED {event['type']} {event['id']}\n")

    return observed


def handlers(log: str | None) -> hooks.Handlers:
    observe = hooks.ObserveHandlers(any=observer(log)) if log else hooks.ObserveHandlers()
    return hooks.Handlers(
        intercept=hooks.InterceptHandlers(tool_before=tool_before), observe=observe
    )


class RequireBearer:
    """ASGI middleware: 401 unless the request carries exactly `Bearer <token>`."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
            if len(given) != 1 or not hmac.compare_digest(given[0], self.expected):
                body = b"unauthorized"
                await send({
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b"Bearer"),
                    ],
                })
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(log: str | None) -> None:
    import threading

    import uvicorn

    app = asgi.App(handlers(log))
    token = os.environ.get("AHP_PEER_TOKEN")
    if token:
        app = RequireBearer(app, token)
    # Bind first so the port is known before uvicorn starts; uvicorn serves this socket.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is announced: early connections wait in the backlog.
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    print(f"SDK {importlib.metadata.version('agenthooksprotocol')}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    def stop_at_stdin_eof() -> None:
        # The parent closed stdin or died: never outlive the test that started us.
        while sys.stdin.buffer.read(256):
            pass
        server.should_exit = True

    threading.Thread(target=stop_at_stdin_eof, daemon=True).start()
    server.run(sockets=[sock])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    log = sys.argv[2] if len(sys.argv) > 2 else None
    if mode == "http" and len(sys.argv) <= 3:
        serve_http(log)
    elif mode == "stdio" and len(sys.argv) <= 3:
        anyio.run(stdio.serve, handlers(log))
    else:
        sys.exit("usage: python_backend.py http|stdio [LOG]")


if __name__ == "__main__":
    main()
