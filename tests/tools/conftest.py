"""Fixtures for tool tests: yards with Python tool code, a loopback HTTP server, clean imports."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ConfigSpec


@pytest.fixture(autouse=True)
def restore_imports() -> Iterator[None]:
    """Tool loading puts yard folders on sys.path and imports their modules: undo it after each test."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        del sys.modules[name]


@pytest.fixture
def code_yard(tmp_path: Path) -> Callable[..., tuple[ConfigSpec, Path]]:
    """code_yard({"tools.py": "..."}, tools={"name": {"import": "tools:fn"}}) -> (config, root)."""

    def make(files: dict[str, str], *, code: str = "code", **config: Any) -> tuple[ConfigSpec, Path]:
        root = tmp_path / "yard"
        for name, text in files.items():
            path = root / code / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        (root / code).mkdir(parents=True, exist_ok=True)
        return ConfigSpec.model_validate({"paths": {"code": code}, **config}), root

    return make


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
               headers: dict[str, str] | None = None) -> None:
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
            echoed = {"method": self.command, "headers": {k.lower(): v for k, v in self.headers.items()},
                      "body": body.decode()}
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


class LoopbackServer:
    """A small HTTP server on 127.0.0.1 for the http_request tool."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.stopping = threading.Event()  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
def web() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    server.thread.start()
    yield server
    server.server.stopping.set()  # type: ignore[attr-defined]
    server.server.shutdown()
    server.server.server_close()
