"""Which hosts a yard lets the server reach: `http.allowed_hosts` of blockyard.yaml, read by the
http_request tool (engine/tools/builtin/http.py), by the server's webhooks (engine/serve/webhooks.py) and
by `blockyard validate` for the yard's `notify:` URLs — one rule, so that no URL reaches an address the
yard's tools may not (cloud metadata at 169.254.169.254, services on the private network)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

MAX_URL = 2048
_PORTS = {"http": 80, "https": 443}


def host_allowed(host: str, port: int | None, allowed: list[str]) -> bool:
    """Is host (and port) matched by an entry: `example.com`, `*.example.com` (subdomains), `host:8080`?"""
    host = host.lower().rstrip(".")
    for entry in allowed:
        pattern, entry_port = _split(entry)
        if entry_port is not None and port != entry_port:
            continue
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return True
        elif host == pattern:
            return True
    return False


def _split(entry: str) -> tuple[str, int | None]:
    """'example.com:8080' -> ('example.com', 8080); no port -> None (any port)."""
    text = entry.strip().lower()
    head, sep, tail = text.rpartition(":")
    if sep and tail.isdigit() and ":" not in head:
        return head.rstrip("."), int(tail)
    return text.rstrip("."), None


def webhook_refusal(url: str, allowed: Sequence[str]) -> str | None:
    """Why `url` may not receive webhooks (None: it may): an http(s) URL on a host `allowed` names."""
    if len(url) > MAX_URL:
        return f"the webhook URL is longer than {MAX_URL} characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return f"'{url}' is not a valid URL"
    if parts.scheme not in _PORTS or not parts.hostname:
        return f"the webhook '{url}' is not an http:// or https:// URL"
    if not host_allowed(parts.hostname, port or _PORTS[parts.scheme], list(allowed)):
        hint = "; none are allowed yet" if not allowed else ""
        return (
            f"the webhook's host '{parts.hostname}' is not in http.allowed_hosts of blockyard.yaml{hint} "
            "(webhooks reach only the hosts the http_request tool may)"
        )
    return None
