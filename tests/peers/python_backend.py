"""An AHP backend built on the official Python SDK (`agenthooksprotocol`), for interop tests.

Usage:
  python_backend.py http   serve over HTTP on 127.0.0.1 with an OS-assigned port; the
                           first stdout line is `PORT <n>`. If AHP_PEER_TOKEN is set,
                           requests without `Authorization: Bearer <token>` get 401.
  python_backend.py stdio  serve newline-delimited JSON-RPC over stdin/stdout.

Policy: deny a tool.before whose tool.input.command contains "rm -rf"; otherwise no effect.
"""

import hmac
import os
import socket
import sys

import anyio
from agenthooksprotocol import effect
from agenthooksprotocol.server import asgi, hooks, stdio

REASON = "python peer denies rm -rf"


def tool_before(ctx: hooks.ToolBeforeContext) -> hooks.ToolBeforeReply:
    command = ctx.raw["params"]["event"].get("tool", {}).get("input", {}).get("command")
    if isinstance(command, str) and "rm -rf" in command:
        return hooks.ToolBeforeReply(effects=(effect.DenyEffect(reason=REASON),))
    return hooks.ToolBeforeReply()


def handlers() -> hooks.Handlers:
    return hooks.Handlers(intercept=hooks.InterceptHandlers(tool_before=tool_before))


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


def serve_http() -> None:
    import uvicorn

    app = asgi.App(handlers())
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
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "http":
        serve_http()
    elif mode == "stdio":
        anyio.run(stdio.serve, handlers())
    else:
        sys.exit("usage: python_backend.py http|stdio")


if __name__ == "__main__":
    main()
