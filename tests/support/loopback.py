"""The TLS context of the tests' HTTP clients: they talk plain http to servers on 127.0.0.1.

httpx builds a client's TLS context when the client is made, whatever its URLs: by default
`ssl.create_default_context` with certifi's CA bundle, ~25 ms of CPU each time — 5% of the suite's CPU,
for the clients and the `httpx.get(...)` polls of a server's /healthz that never speak TLS at all. Every
httpx client the tests make is given `verify=LOOPBACK` instead (tests/test_loopback_clients.py checks
that): one context, made once, that still verifies certificates and host names but trusts no CA, so an
https URL given by mistake fails its handshake rather than connecting unchecked. The engine's own clients
(the built-in http tool, `blockyard diff --server`, the model providers) keep their verified defaults.
"""

from __future__ import annotations

import ssl

LOOPBACK = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname, no CA loaded
