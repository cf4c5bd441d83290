"""Which Host headers the server answers: its defence against DNS rebinding.

A web page on evil.example can make its own name resolve to 127.0.0.1 and then read the
loopback server as if it were same-origin; the browser still sends `Host: evil.example`. So a
server without a token answers only Host values that name itself: 127.0.0.1, localhost, [::1]
and the address it was bound to, each bare or with the bound port, plus the entries of
`server.allowed_hosts` in blockyard.yaml (`name` for any port, `name:port` for one, `*` for
anything). A server with a token is protected by the token (a rebinding page does not have
it), so it checks Host only when `allowed_hosts` is configured. See docs/serve.md.

Starlette's TrustedHostMiddleware is not used: it answers in plain text (the API always
answers a JSON problem) and ignores ports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
ANY = "*"
_HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::([0-9]{1,5}))?$")


def parse_host(value: str | None) -> tuple[str, int | None] | None:
    """`name[:port]` (IPv6 in brackets) as (lower-case name, port); None when missing or malformed."""
    if not value:
        return None
    found = _HOST.match(value.strip().lower())
    if found is None:
        return None
    return found.group(1), int(found.group(2)) if found.group(2) else None


def bracketed(host: str) -> str:
    """The name a Host header uses for a bind address: IPv6 literals in brackets."""
    host = host.strip().lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_allowed(
    header: str | None, allowed: Sequence[str], bound_host: str, bound_port: int | None
) -> bool:
    """May a request with this Host header be answered? (Call only when the check applies.)"""
    if ANY in allowed:
        return True
    given = parse_host(header)
    if given is None:
        return False
    name, port = given
    if name in (*LOOPBACK_NAMES, bracketed(bound_host)) and port in (None, bound_port):
        return True
    for entry in allowed:
        wanted = parse_host(entry)
        if wanted is not None and wanted[0] == name and wanted[1] in (None, port):
            return True
    return False


def check_applies(token: str | None, allowed: Sequence[str]) -> bool:
    """Without a token the Host check always applies; with one, only when hosts are configured."""
    return token is None or bool(allowed)
