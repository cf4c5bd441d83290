"""A loopback HTTP server for the http_request tests (a module of its own: conftest is not importable)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def _reply(
        self,
        status: int,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def _route(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        if path == "/hello":
            self._reply(200, "héllo".encode())
        elif path == "/echo":
            echoed = {
                "method": self.command,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode(),
            }
            self._reply(200, json.dumps(echoed).encode(), "application/json")
        elif path == "/big":
            self._reply(200, b"x" * 5000)
        elif path == "/redirect":
            self._reply(302, b"", headers={"Location": query.removeprefix("to=")})
        elif path == "/slow":
            self.server.stopping.wait(3)  # type: ignore[attr-defined]
            self._reply(200, b"late")
        else:
            self._reply(404, b"no such page")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the timeout test) is expected


class LoopbackServer:
    """A small HTTP server on 127.0.0.1 for the http_request tool."""

    def __init__(self) -> None:
        self.server = _QuietServer(("127.0.0.1", 0), _Handler)
        self.server.stopping = threading.Event()  # type: ignore[attr-defined]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"
