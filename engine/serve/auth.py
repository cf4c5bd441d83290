"""Who may talk to the server.

On a loopback address the server is open unless BLOCKYARD_TOKEN is set. Any other address
needs the token: the server refuses to start without it, and then every API call except
/healthz (and the static page, which asks for the token) must send `Authorization: Bearer
<token>`. The token is compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping

from engine.core.errors import UsageError

TOKEN_ENV = "BLOCKYARD_TOKEN"
# Reachable without the token: liveness, the page shell and its assets, the API docs.
PUBLIC_PATHS = ("/healthz", "/", "/favicon.ico", "/docs", "/openapi.json")
PUBLIC_PREFIXES = ("/static/", "/docs/")


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; anything else (0.0.0.0 included) is exposed."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def server_token(host: str, env: Mapping[str, str] | None = None) -> str | None:
    """The token to enforce for a server bound to `host`; refuses an exposed host without one."""
    token = (os.environ if env is None else env).get(TOKEN_ENV, "").strip() or None
    if token is None and not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without a token: set {TOKEN_ENV} "
            f"(clients send it as `Authorization: Bearer <token>`), or bind 127.0.0.1"
        )
    return token


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def authorized(header: str | None, token: str) -> bool:
    """Does an Authorization header carry the bearer token?"""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8"))


def api_key_matches(header: str | None, token: str) -> bool:
    """Does an X-Api-Key header (langgraph-sdk's way to send a key) carry the token?"""
    if not header:
        return False
    return hmac.compare_digest(header.strip().encode("utf-8"), token.encode("utf-8"))
