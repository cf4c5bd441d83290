"""Hostile HTTP requests against a real `blockyard serve` process: never a 500, never a hang.

Hundreds of generated requests (every route, hostile path parameters, query strings, headers and
bodies) go to a server started as a user starts it; each must be answered within the hang limit
with a status below 500 and the server's memory must stay bounded. A run started with a template
bomb in its inputs must not stall other requests either.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hostile.hostile_harness import MAX_RSS_MB, child_env
from tests.support import processes
from tests.support.example import copy_example_yard
from tests.support.loopback import LOOPBACK

ANSWER_SECONDS = 5.0  # every request is answered (or its stream starts) within this
REQUESTS = int(os.environ.get("BLOCKYARD_HOSTILE_REQUESTS", "300"))
HUGE = "1" + "0" * 5000
SURROGATE_JSON = '"\\ud800"'

# The routes' own methods: most requests use them, so that they reach the handlers, not a 405.
METHODS = {
    "/flows/{flow}/runs": "POST",
    "/runs/{run}/resume": "POST",
    "/threads/{run}/runs": "POST",
}
ROUTES = [
    "/",
    "/healthz",
    "/flows",
    "/flows/{flow}",
    "/flows/{flow}/runs",
    "/runs",
    "/runs/{run}",
    "/runs/{run}/events",
    "/runs/{run}/resume",
    "/diagnostics",
    "/docs",
    "/openapi.json",
    "/gates",
    "/threads",
    "/threads/{run}",
    "/threads/{run}/history",
    "/threads/{run}/runs",
    "/schedules",
    "/static/../../etc/passwd",
    "/{junk}",
]
FLOWS = [
    "hello",
    "triage_ticket",
    "order_lunch",
    "nope",
    "%00",
    "..%2F..%2Fetc",
    "x" * 3000,
    "héllo",
    "%ff%fe",
]
RUN_IDS = ["nope", "0", "-1", "x" * 5000, "%00", "..", "%2e%2e%2f", HUGE, "ü"]
QUERIES = [
    "",
    "?after=99999999999999999999999",
    "?after=-1",
    "?after=abc",
    "?after=9223372036854775808",
    "?limit=-5",
    f"?limit={HUGE}",
    "?limit=99999999999999999999",
    "?status=%00",
    "?flow=" + "x" * 4000,
    "?after=1e400",
    "?after=nan",
    "?wait=true",
    "?x=1&x=2",
]
HEADERS: list[dict[str, str]] = [
    {},
    {"Accept": "text/event-stream"},
    {"Last-Event-ID": "9223372036854775808"},
    {"Last-Event-ID": "-7"},
    {"Last-Event-ID": "abc"},
    {"Last-Event-ID": HUGE[:100]},
    {"Content-Type": "text/plain"},
    {"Content-Type": "application/json; charset=latin-1"},
    {"Content-Type": "multipart/form-data; boundary=x"},
    {"Authorization": "Bearer " + "x" * 5000},
    {"Accept": "*/*", "Accept-Encoding": "gzip, br"},
    {"Prefer": "wait=99999999999999999999"},
    {"Last-Event-ID": HUGE},
    {"Last-Event-ID": "1." + HUGE},
]
# The LangGraph Server API under /lg: store filters the stores refuse, Last-Event-IDs past Python's digit limit,
# thread metadata past the limits (one request, and PATCHes that add up).
LG_BAD_FILTERS = [
    {"a' OR 1=1 --": {"$gt": 1}},
    {"a": {"$where": "1"}},
    {"": 1},
    {"a": {"$gt": [[[[1]]]]}},
    {"x" * 5000: 1},
    {"a": {"$eq": {"$ne": 1}}},
    {"a": {}},
    {"a.b.c": {"$lte": "z"}},
]
LG_RAW_FILTERS = [
    '{"filter": {"n": ' + HUGE + "}}",
    '{"filter": {"n": {"$gt": 100000000000000000000000}}}',
    '{"filter": {"n": 1e400}}',
    '{"filter": {"n": NaN}}',
    '{"filter": {"n": ' + SURROGATE_JSON + "}}",
    '{"filter": []}',
    '{"filter": "x"}',
    '{"namespace_prefix": [' + SURROGATE_JSON + "]}",
    '{"query": ' + SURROGATE_JSON + "}",
]


def _bodies() -> list[bytes | None]:
    deep = "[" * 100_000 + "]" * 100_000
    return [
        None,
        b"",
        b"{",
        b"null",
        b"[]",
        b'"text"',
        b"123",
        b"{}",
        b'{"inputs": null}',
        b'{"inputs": []}',
        b'{"inputs": {"name": 5}}',
        b'{"inputs": {"name": "Ada"}, "run_id": 7}',
        b'{"inputs": {"name": "Ada"}, "run_id": "../../x"}',
        deep.encode(),
        ('{"inputs": {"name": ' + SURROGATE_JSON + "}}").encode(),
        ('{"inputs": {"name": "Ada", ' + SURROGATE_JSON + ": 1}}").encode(),
        ('{"inputs": {"name": ' + HUGE + "}}").encode(),
        b'{"inputs": {"name": 100000000000000000000000}}',
        b'{"inputs": {"name": 1e400}}',
        b'{"inputs": {"name": NaN}}',
        b'{"inputs": {"name": "x"}, "extra": 1}',
        b'{"approve": "yes"}',
        b'{"approve": true, "values": {"restaurant": ' + SURROGATE_JSON.encode() + b"}}",
        b'{"approve": true, "reason": ' + HUGE.encode() + b"}",
        b'{"approve": false, "values": []}',
        b"\xff\xfe\x00\x01",
        b'{"inputs": {"name": "' + b"x" * 6_000_000 + b'"}}',
        b'{"inputs": {"name": "{{ \'a\' * 10**8 }}"}}',
        b'{"inputs": {"name": "{{ 10 ** (10 ** 9) }}"}}',
        json.dumps({"inputs": {"ticket": "{% for i in range(10**9) %}x{% endfor %}"}}).encode(),
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    yard = copy_example_yard(tmp_path / "yard")
    port = _free_port()
    # a pipe nobody reads would fill up and stall the server
    log = (tmp_path / "serve.log").open("wb")
    proc = processes.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            "serve",
            "--port",
            str(port),
            "--no-reload",
            "--grace",
            "2",
            "--root",
            str(yard),
        ],
        env=child_env(),
        cwd=str(yard),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1, verify=LOOPBACK).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                "blockyard serve did not start: " + (tmp_path / "serve.log").read_text()[-2000:]
            )
        time.sleep(0.1)
    yield url, proc
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _requests(seed: int, count: int, real_runs: list[str]) -> list[dict[str, Any]]:
    """Requests built from the routes; half of them name real flows and real runs, so that they reach
    the handlers' own parsing rather than a 404."""
    rng = random.Random(seed)
    bodies = _bodies()
    made = []
    for _ in range(count):
        real = rng.random() < 0.5
        flow = rng.choice(["hello", "order_lunch", "triage_ticket"]) if real else rng.choice(FLOWS)
        run = rng.choice(real_runs) if real and real_runs else rng.choice(RUN_IDS)
        route = rng.choice(ROUTES)
        path = route.format(flow=flow, run=run, junk=rng.choice(FLOWS))
        method = (
            METHODS.get(route, "GET")
            if rng.random() < 0.7
            else rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
        )
        made.append(
            {
                "method": method,
                "path": path + rng.choice(QUERIES),
                "headers": rng.choice(HEADERS),
                "body": rng.choice(bodies),
            }
        )
    return made


def test_hostile_requests_never_get_a_500_or_hang(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = server
    failures: list[str] = []
    with httpx.Client(base_url=url, timeout=ANSWER_SECONDS, verify=LOOPBACK) as client:
        real_runs = [
            client.post("/flows/hello/runs", json={"inputs": {"name": "Ada"}}).json()["run_id"],
            client.post("/flows/order_lunch/runs", json={"inputs": {"user_id": "ada"}}).json()[
                "run_id"
            ],
        ]
        for request in _requests(seed=17, count=REQUESTS, real_runs=real_runs):
            described = f"{request['method']} {request['path'][:120]} {request['headers']!s:.80}"
            try:
                with client.stream(
                    request["method"],
                    request["path"],
                    headers=request["headers"],
                    content=request["body"],
                ) as response:
                    # a live event stream may legitimately stay open; its first bytes must come in time
                    first = (
                        next(response.iter_raw(), b"")
                        if "event-stream" in response.headers.get("content-type", "")
                        else response.read()
                    )
                    if response.status_code >= 500:
                        failures.append(
                            f"{described}: HTTP {response.status_code} {bytes(first)[:200]!r}"
                        )
            except httpx.TimeoutException:
                failures.append(f"{described}: no answer within {ANSWER_SECONDS:.0f} s")
            except httpx.TransportError as exc:
                failures.append(f"{described}: connection failed ({exc})")
            if proc.poll() is not None:
                failures.append(f"{described}: the server died")
                break
    assert not failures, f"{len(failures)} of {REQUESTS} requests failed:\n" + "\n".join(
        failures[:12]
    )
    assert _rss_mb(proc.pid) < MAX_RSS_MB, f"server peak memory {_rss_mb(proc.pid):.0f} MB"


def test_hostile_langgraph_api_requests_never_get_a_500(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = server
    failures: list[str] = []
    big = {"x": "y" * 3_000_000}
    with httpx.Client(base_url=url + "/lg", timeout=ANSWER_SECONDS * 4, verify=LOOPBACK) as client:
        thread = client.post("/threads", json={}).json()["thread_id"]
        run_id = (
            client.post(
                f"/threads/{thread}/runs/wait",
                json={"assistant_id": "hello", "input": {"name": "Ada"}},
                headers={"Prefer": "return=minimal"},
            )
            .headers["Content-Location"]
            .rsplit("/", 1)[-1]
        )
        requests: list[tuple[str, str, dict[str, str], bytes | None]] = [
            *[
                ("POST", "/store/items/search", {}, json.dumps({"filter": f}).encode())
                for f in LG_BAD_FILTERS
            ],
            *[("POST", "/store/items/search", {}, body.encode()) for body in LG_RAW_FILTERS],
            *[
                ("GET", f"/threads/{thread}/runs/{run_id}/stream", {"Last-Event-ID": value}, None)
                for value in (HUGE, "1." + HUGE, HUGE + ".1", "0" * 5000)
            ],
            ("POST", "/threads", {}, json.dumps({"metadata": big}).encode()),
            ("PATCH", f"/threads/{thread}", {}, json.dumps({"metadata": big}).encode()),
            *[
                (
                    "PATCH",
                    f"/threads/{thread}",
                    {},
                    json.dumps({"metadata": {f"k{n}": "z" * 30_000}}).encode(),
                )
                for n in range(20)
            ],
            ("POST", "/threads/search", {}, b'{"limit": 1000}'),
            ("GET", "/store/items?namespace=a.b&key=missing", {}, None),
        ]
        for method, path, headers, body in requests:
            described = f"{method} /lg{path[:100]} {headers!s:.60} {(body or b'')[:80]!r}"
            try:
                with client.stream(
                    method,
                    path,
                    headers={"Content-Type": "application/json", **headers},
                    content=body,
                ) as response:
                    first = (
                        response.read()
                        if "event-stream" not in response.headers.get("content-type", "")
                        else next(response.iter_raw(), b"")
                    )
                    if response.status_code >= 500:
                        failures.append(
                            f"{described}: HTTP {response.status_code} {bytes(first)[:200]!r}"
                        )
                    if path == "/threads/search" and len(first) > 10_000_000:
                        failures.append(f"{described}: {len(first)} bytes")
            except httpx.TransportError as exc:
                failures.append(f"{described}: {type(exc).__name__} ({exc})")
        grown = client.get(f"/threads/{thread}").json()
        assert len(json.dumps(grown["metadata"])) <= 64 * 1024, (
            "PATCHes grew the thread's metadata past its limit"
        )
    assert proc.poll() is None, "the server died"
    assert not failures, f"{len(failures)} of {len(requests)} requests failed:\n" + "\n".join(
        failures[:12]
    )
