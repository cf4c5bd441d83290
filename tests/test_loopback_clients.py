"""The tests' HTTP clients build no CA-loading TLS context (tests/support/loopback.py): every httpx client
or one-off request made in tests/ is given `verify=LOOPBACK`, and that context still verifies."""

from __future__ import annotations

import ast
import ssl
from pathlib import Path

from tests.support.loopback import LOOPBACK

TESTS = Path(__file__).resolve().parent

# httpx's functions and classes that build a client, and with it a TLS context, when called
CLIENT_MAKERS = {
    "get",
    "post",
    "put",
    "patch",
    "delete",
    "head",
    "options",
    "request",
    "stream",
    "Client",
    "AsyncClient",
    "HTTPTransport",
    "AsyncHTTPTransport",
}


def unverified_calls(source: str) -> list[int]:
    """The lines of httpx calls in `source` that leave `verify` to httpx's default (certifi's CA bundle)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLIENT_MAKERS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "httpx"
            and not any(keyword.arg == "verify" for keyword in node.keywords)
        ):
            found.append(node.lineno)
    return found


def test_every_httpx_client_of_the_tests_is_given_the_loopback_context() -> None:
    missing = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in unverified_calls(path.read_text(encoding="utf-8"))
    ]
    assert missing == [], "give these verify=LOOPBACK (tests/support/loopback.py): " + ", ".join(
        missing
    )


def test_the_scan_sees_a_call_without_verify() -> None:
    assert unverified_calls(
        "import httpx\nhttpx.get('http://127.0.0.1:1/healthz', timeout=1)\n"
    ) == [2]
    assert unverified_calls("import httpx\nwith httpx.Client(base_url='x') as c:\n    pass\n") == [
        2
    ]
    assert unverified_calls("import httpx\nhttpx.Client(base_url='x', verify=LOOPBACK)\n") == []


def test_the_loopback_context_verifies_and_trusts_no_authority() -> None:
    assert LOOPBACK.verify_mode == ssl.CERT_REQUIRED and LOOPBACK.check_hostname
    # nothing loaded: an https URL fails its handshake
    assert LOOPBACK.cert_store_stats()["x509_ca"] == 0
