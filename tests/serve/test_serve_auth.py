"""Who may call the server: loopback by default, a bearer token for anything else."""

from __future__ import annotations

import pytest

from engine.core.errors import UsageError
from engine.serve.auth import authorized, is_loopback, is_public, server_token


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_an_exposed_host_needs_a_token() -> None:
    with pytest.raises(
        UsageError, match=r"refusing to listen on 0\.0\.0\.0 without a token: set BLOCKYARD_TOKEN"
    ):
        server_token("0.0.0.0", {})
    assert server_token("0.0.0.0", {"BLOCKYARD_TOKEN": "s3cret"}) == "s3cret"
    assert server_token("127.0.0.1", {}) is None
    assert server_token("127.0.0.1", {"BLOCKYARD_TOKEN": " s3cret "}) == "s3cret"


def test_bearer_header_check() -> None:
    assert authorized("Bearer s3cret", "s3cret")
    assert authorized("bearer s3cret", "s3cret")
    assert not authorized("Bearer s3cre", "s3cret")
    assert not authorized("Basic s3cret", "s3cret")
    assert not authorized(None, "s3cret")
    assert not authorized("", "s3cret")


def test_public_paths() -> None:
    assert all(is_public(p) for p in ("/healthz", "/", "/static/app.js", "/docs", "/openapi.json"))
    assert not any(
        is_public(p) for p in ("/flows", "/runs", "/runs/x/events", "/diagnostics", "/staticx")
    )
