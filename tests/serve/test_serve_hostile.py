"""Hostile requests against a real server on 127.0.0.1: Host checks (DNS rebinding), body and input
limits, odd Last-Event-IDs, values JSON allows but the engine can't keep, and a table of bad
requests that must all get a 4xx JSON problem, never a 500."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.serve.server import Settings
from tests.serve.serve_helpers import GATED_FLOW, YARD, Live, start_live, wait_run

ECHO_FLOW = """
flow: echo
version: 1
description: Take any inputs, add 1 and 2.
inputs:
  name: {type: string, default: x}
  data: {type: any, default: null}
  n: {type: number, default: 1}
outputs: [total]
steps:
  - id: sum
    uses: adder
    with: {x: 1, y: 2}
"""

HOSTILE_YARD = {**YARD, "flows/echo.yaml": ECHO_FLOW, "flows/gated.yaml": GATED_FLOW}
JSON = {"Content-Type": "application/json"}


def with_config(make_yard: Callable[[dict[str, str]], Path], config: str) -> Path:
    return make_yard({**HOSTILE_YARD, "blockyard.yaml": config})


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One server for the read-mostly tests of this module (default limits, no token)."""
    root = tmp_path_factory.mktemp("hostile")
    for name, text in HOSTILE_YARD.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


def port_of(live: Live) -> int:
    return int(live.url.rsplit(":", 1)[1])


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return error


def raw_exchange(live: Live, head: bytes, body_parts: tuple[bytes, ...] = ()) -> tuple[int, bytes]:
    """Send bytes on a fresh connection, then read what the server answers (status, body)."""
    with socket.create_connection(("127.0.0.1", port_of(live)), timeout=10) as sock:
        sock.sendall(head)
        for part in body_parts:
            sock.sendall(part)
        received = b""
        while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < _length(
            received
        ):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def _length(received: bytes) -> int:
    for line in received.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


# ---- Host header (DNS rebinding) ------------------------------------------------------------


def test_a_foreign_host_cannot_read_the_runs(live: Live) -> None:
    with live.client() as client:
        started = client.post("/flows/add/runs", json={"inputs": {"a": 40}}).json()
        assert started["status"] == "finished"
        for path in (
            "/runs",
            f"/runs/{started['run_id']}",
            f"/runs/{started['run_id']}/events",
            "/flows",
            "/",
        ):
            response = client.get(
                path, headers={"Host": "evil.example", "Accept": "application/json"}
            )
            error = assert_problem(response, 421, "host_not_allowed")
            assert "evil.example" in error["message"] and "server.allowed_hosts" in error["message"]
            assert started["run_id"] not in response.text
        response = client.post(
            "/flows/add/runs", json={"inputs": {"a": 1}}, headers={"Host": "evil.example:80"}
        )
        assert_problem(response, 421, "host_not_allowed")


OWN_NAMES = [
    "127.0.0.1",
    "localhost",
    "[::1]",
    "LOCALHOST",
    "127.0.0.1:{port}",
    "localhost:{port}",
    "[::1]:{port}",
]
OTHER_HOSTS = [
    "localhost:1",
    "127.0.0.1:{other}",
    "evil.example:{port}",
    "127.0.0.1.evil.example",
    "localhost.",
    "[::2]",
    "local host",
    "localhost:port",
    "",
    "127.0.0.1:{port}/x",
]


def test_only_the_servers_own_names_are_answered(live: Live) -> None:
    port = port_of(live)
    with live.client() as client:
        for host in OWN_NAMES:
            response = client.get("/runs", headers={"Host": host.format(port=port)})
            assert response.status_code == 200, (host, response.text)
        for host in OTHER_HOSTS:
            response = client.get(
                "/flows", headers={"Host": host.format(port=port, other=port + 1)}
            )
            assert_problem(response, 421, "host_not_allowed")
        # /healthz tells nothing private, and probes often address the server by IP
        response = client.get("/healthz", headers={"Host": "10.0.0.7:8000"})
        assert response.status_code == 200 and response.json()["status"] == "ok"


def test_a_request_without_host_is_refused(live: Live) -> None:
    status, body = raw_exchange(live, b"GET /runs HTTP/1.0\r\n\r\n")
    assert status == 421
    assert b'"host_not_allowed"' in body and b"no Host header" in body


def test_allowed_hosts_come_from_blockyard_yaml(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = with_config(
        make_yard, "server:\n  allowed_hosts: [blockyard.example, 'Proxy.example:8443']\n"
    )
    live = serve(root, watch=False, schedules=False)
    with live.client() as client:
        for host in (
            "blockyard.example",
            "BLOCKYARD.example:9000",
            "proxy.example:8443",
            "localhost",
        ):
            assert client.get("/runs", headers={"Host": host}).status_code == 200, host
        for host in (
            "proxy.example",
            "proxy.example:8000",
            "evil.example",
            "sub.blockyard.example",
        ):
            assert_problem(client.get("/runs", headers={"Host": host}), 421, "host_not_allowed")
    star = serve(
        with_config(make_yard, "server:\n  allowed_hosts: ['*']\n"), watch=False, schedules=False
    )
    with star.client() as client:
        assert client.get("/runs", headers={"Host": "anything.example:1234"}).status_code == 200


def test_a_token_server_checks_hosts_only_when_they_are_configured(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    # The token is what protects it (a rebinding page does not have it): any Host by default...
    open_hosts = serve(make_yard(HOSTILE_YARD), watch=False, schedules=False, token="s3cret")
    with open_hosts.client(token="s3cret") as client:
        assert client.get("/runs", headers={"Host": "blockyard.lan:8000"}).status_code == 200
    # ...and exactly the configured ones (plus its own names) once allowed_hosts is set.
    root = with_config(make_yard, "server:\n  allowed_hosts: [blockyard.lan]\n")
    checked = serve(root, watch=False, schedules=False, token="s3cret")
    with checked.client(token="s3cret") as client:
        assert client.get("/runs", headers={"Host": "blockyard.lan:8000"}).status_code == 200
        assert_problem(
            client.get("/runs", headers={"Host": "evil.example"}), 421, "host_not_allowed"
        )


def test_a_bad_allowed_hosts_entry_is_a_validation_error(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    from engine.definitions.project import load_project

    good = with_config(
        make_yard,
        "server:\n  allowed_hosts: [a.example, 'b.example:8443', '[::1]:80', '*']\n"
        "  max_body_bytes: 1000\n  max_input_bytes: 100\n",
    )
    assert load_project(good).diagnostics == []
    assert load_project(good).config.server.allowed_hosts == [
        "a.example",
        "b.example:8443",
        "[::1]:80",
        "*",
    ]
    (good / "blockyard.yaml").write_text(
        "server:\n  allowed_hosts: [ok.example, 'http://blockyard.example/']\n"
    )
    [problem] = [d for d in load_project(good).diagnostics if d.file == "blockyard.yaml"]
    assert (problem.severity, problem.line) == ("error", 2), problem
    assert "http://blockyard.example/" in problem.message


# ---- request body and input limits ----------------------------------------------------------


def test_a_body_over_the_default_limit_is_refused(live: Live) -> None:
    with live.client() as client:
        big = {"inputs": {"name": "x" * (4 * 1024 * 1024)}}
        error = assert_problem(client.post("/flows/echo/runs", json=big), 413, "body_too_large")
        assert "4194304" in error["message"] and "server.max_body_bytes" in error["message"]


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(live: Live) -> None:
    head = (
        b"POST /flows/echo/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000000000\r\n\r\n"
    )
    status, body = raw_exchange(live, head)  # no body bytes at all: the answer comes anyway
    assert status == 413 and b'"body_too_large"' in body


def test_a_chunked_body_is_refused_while_it_streams(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve(
        with_config(make_yard, "server:\n  max_body_bytes: 2048\n"), watch=False, schedules=False
    )
    head = (
        b"POST /flows/echo/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 1024
    # 3 KiB sent and the body never ended (no last chunk): refused without waiting for the rest
    status, body = raw_exchange(live, head, tuple(b"400\r\n" + chunk + b"\r\n" for _ in range(3)))
    assert status == 413 and b"larger than 2048 bytes" in body
    with live.client() as client:
        assert (
            client.post("/flows/echo/runs", json={"inputs": {"name": "y" * 1500}}).status_code
            == 200
        )
        assert client.get("/runs").json()["runs"][0]["inputs"]["name"] == "y" * 1500


def test_inputs_and_resume_values_are_capped(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve(
        with_config(make_yard, "server:\n  max_input_bytes: 200\n"), watch=False, schedules=False
    )
    with live.client() as client:
        error = assert_problem(
            client.post("/flows/echo/runs", json={"inputs": {"name": "é" * 100}}),
            413,
            "inputs_too_large",
        )
        assert (
            "the limit is 200" in error["message"] and "server.max_input_bytes" in error["message"]
        )
        assert client.get("/runs").json()["runs"] == []
        assert (
            client.post("/flows/echo/runs", json={"inputs": {"name": "é" * 80}}).json()["status"]
            == "finished"
        )
        paused = client.post("/flows/gated/runs", json={"inputs": {"a": 1}}).json()
        assert paused["status"] == "waiting", paused
        decision = {"approve": True, "values": {"b": 2}, "reason": "z" * 300}
        assert_problem(
            client.post(f"/runs/{paused['run_id']}/resume", json=decision), 413, "inputs_too_large"
        )
        assert client.get(f"/runs/{paused['run_id']}").json()["status"] == "waiting"


# ---- Last-Event-ID ------------------------------------------------------------------------------


BAD_LAST_EVENT_IDS = [
    "9223372036854775808",
    "99999999999999999999999",
    "-1",
    "-99999999999999999999",
    "abc",
    "1_0",
    "+5",
    "1.5",
    "0x10",
    "1" * 400,
]


def test_a_bad_last_event_id_is_a_400_and_the_largest_good_one_answers(live: Live) -> None:
    with live.client() as client:
        run_id = client.post("/flows/add/runs", json={"inputs": {"a": 1}}).json()["run_id"]
        for accept in ("application/json", "text/event-stream"):
            for value in BAD_LAST_EVENT_IDS:
                response = client.get(
                    f"/runs/{run_id}/events", headers={"Last-Event-ID": value, "Accept": accept}
                )
                assert_problem(response, 400, "bad_last_event_id")
            for value in [
                *BAD_LAST_EVENT_IDS,
                "\u0661",
            ]:  # other scripts' digits fit only in the query
                response = client.get(
                    f"/runs/{run_id}/events", params={"after": value}, headers={"Accept": accept}
                )
                assert_problem(response, 400, "bad_last_event_id")
        response = client.get(
            f"/runs/{run_id}/events",
            params={"after": str(2**63 - 1)},
            headers={"Accept": "application/json"},
        )
        assert response.status_code == 200 and response.json() == {"events": []}


# ---- values JSON allows but the engine cannot keep ----------------------------------------------


UNKEEPABLE: list[tuple[str, str]] = [
    ('{"inputs": {"name": "\\ud800"}}', "inputs.name"),
    ('{"inputs": {"name": "ok \\udfff"}}', "inputs.name"),
    ('{"inputs": {"\\ud800": 1}}', "inputs.\\ud800"),
    ('{"inputs": {"data": {"k": ["a", "\\udc00"]}}}', "inputs.data.k[1]"),
    ('{"inputs": {"name": "x"}, "run_id": "\\ud800"}', "run_id"),
    ('{"inputs": {"n": 18446744073709551616}}', "inputs.n"),
    ('{"inputs": {"data": [1, -9223372036854775809]}}', "inputs.data[1]"),
    ('{"inputs": {"n": NaN}}', "inputs.n"),
    ('{"inputs": {"data": -Infinity}}', "inputs.data"),
    ('{"inputs": {"n": 1e400}}', "inputs.n"),
    ('{"inputs": {"data": ' + "[" * 70 + "]" * 70 + "}}", "inputs.data" + "[0]" * 63),
]


def test_values_the_engine_cannot_keep_are_a_422_naming_the_field(live: Live) -> None:
    with live.client() as client:
        for body, field in UNKEEPABLE:
            response = client.post(
                "/flows/echo/runs", content=body, headers={"Content-Type": "application/json"}
            )
            error = assert_problem(response, 422, "invalid_request")
            assert error["field"] == field and error["message"].startswith(f"{field}: "), (
                body,
                error,
            )
        assert client.get("/runs", params={"flow": "echo"}).json()["runs"] == []
        # the limits themselves, and a surrogate pair (one valid character), are fine
        body = '{"inputs": {"data": [9223372036854775807, -9223372036854775808], "name": "\\ud83d\\ude00"}}'
        result = client.post(
            "/flows/echo/runs", content=body, headers={"Content-Type": "application/json"}
        ).json()
        assert result["status"] == "finished", result
        run = client.get(f"/runs/{result['run_id']}").json()
        assert (
            run["inputs"]["data"] == [2**63 - 1, -(2**63)] and run["inputs"]["name"] == "\U0001f600"
        )


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        ('{"approve": true, "values": {"b": "\\ud800"}}', "values.b"),
        ('{"approve": true, "values": {"b": 1}, "reason": "because \\udbff"}', "reason"),
        ('{"approve": true, "gate": "\\ud800"}', "gate"),
        ('{"approve": false, "actor": "\\udc00x"}', "actor"),
        ('{"approve": true, "values": {"b": 99999999999999999999999}}', "values.b"),
        ('{"approve": true, "values": {"b": NaN}}', "values.b"),
    ],
)
def test_resume_values_the_engine_cannot_keep_are_a_422(
    live: Live, decision: str, field: str
) -> None:
    with live.client() as client:
        paused = client.post("/flows/gated/runs", json={"inputs": {"a": 1}}).json()
        assert paused["status"] == "waiting", paused
        response = client.post(
            f"/runs/{paused['run_id']}/resume",
            content=decision,
            headers={"Content-Type": "application/json"},
        )
        assert assert_problem(response, 422, "invalid_request")["field"] == field
        # nothing was decided
        assert client.get(f"/runs/{paused['run_id']}").json()["status"] == "waiting"
        finished = client.post(
            f"/runs/{paused['run_id']}/resume", json={"approve": True, "values": {"b": 4}}
        )
        assert (finished.json()["status"], finished.json()["outputs"]) == ("finished", {"total": 5})


# ---- the resource first, then the body ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        (b"x", {}),
        (b"{}", {"Content-Type": "text/plain"}),
        (b'{"inputs": ', JSON),
        (b"[1]", JSON),
        (b'{"inputs": {"a": "\\ud800"}}', JSON),
    ],
)
def test_an_unknown_flow_or_run_is_a_404_whatever_the_body(
    live: Live, content: bytes, headers: dict[str, str]
) -> None:
    with live.client() as client:
        assert_problem(
            client.post("/flows/nope/runs", content=content, headers=headers), 404, "unknown_flow"
        )
        assert_problem(
            client.post("/runs/nope/resume", content=content, headers=headers), 404, "unknown_run"
        )


# ---- a table of hostile requests: a 4xx JSON problem each, never a 500 --------------------------

HOSTILE: list[tuple[str, str, dict[str, Any], int, str]] = [
    # (method, path, httpx arguments, status, code); {run} is a finished run, {waiting} a waiting one
    ("POST", "/flows/add/runs", {"json": {"inputs": None}}, 422, "invalid_request"),
    ("POST", "/flows/add/runs", {"json": {"inputs": "a=1"}}, 422, "invalid_request"),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1}, "run_id": 5}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1}, "run_id": ["x"]}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1}, "run_id": "x" * 65}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1}, "run_id": "../etc"}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1}, "run_id": ""}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1}, "run_id": "nightly\n"}},
        422,
        "invalid_request",
    ),
    ("POST", "/flows/add/runs", {"json": {"inputs": {"a": [1]}}}, 422, "invalid_request"),
    ("POST", "/flows/add/runs", {"json": {"inputs": {"a": {"$gt": 1}}}}, 422, "invalid_request"),
    ("POST", "/flows/add/runs", {"json": {"inputs": {"a": 1.5}}}, 422, "invalid_request"),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1, "b": 99999999999999999999}}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"json": {"inputs": {"a": 1, "x" * 5000: 1}}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"content": b'{"inputs": {"a": 1}, "\\ud800": 1}', "headers": JSON},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"content": b"\xef\xbb\xbf{}", "headers": JSON},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"content": b"\xff\xfe\x00", "headers": JSON},
        400,
        "malformed_json",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"content": b'{"inputs": ' + b"[" * 100_000 + b"}", "headers": JSON},
        400,
        "malformed_json",
    ),
    (
        "POST",
        "/flows/add/runs",
        {"content": b"{'inputs': {}}", "headers": JSON},
        400,
        "malformed_json",
    ),
    ("POST", "/flows/add/runs", {"content": b"true", "headers": JSON}, 422, "invalid_request"),
    ("POST", "/flows/add/runs", {"content": b'"inputs"', "headers": JSON}, 422, "invalid_request"),
    (
        "POST",
        "/flows/add/runs",
        {"content": b'inputs={"a": 1}', "headers": {"Content-Type": "text/json"}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/flows/add/runs",
        {
            "content": b'{"inputs": {"a": 1}}',
            "headers": {"Content-Type": "text/plain", "Origin": "http://evil.example"},
        },
        422,
        "invalid_request",
    ),
    ("POST", "/flows/add/runs?wait=maybe", {"json": {"inputs": {"a": 1}}}, 422, "invalid_request"),
    ("POST", "/flows/%ED%A0%80/runs", {"json": {}}, 404, "unknown_flow"),
    ("POST", "/flows/" + "f" * 4000 + "/runs", {"json": {}}, 404, "unknown_flow"),
    ("GET", "/flows/%00%ff", {}, 404, "unknown_flow"),
    ("GET", "/flows/\u00e9t\u00e9", {}, 404, "unknown_flow"),
    ("GET", "/runs?limit=99999999999999999999999", {}, 422, "invalid_request"),
    ("GET", "/runs?limit=0", {}, 422, "invalid_request"),
    ("GET", "/runs?limit=-5", {}, 422, "invalid_request"),
    ("GET", "/runs?limit=1e3", {}, 422, "invalid_request"),
    ("GET", "/runs?limit=NaN", {}, 422, "invalid_request"),
    ("GET", "/runs?status=%ED%A0%80", {}, 422, "invalid_request"),
    ("GET", "/runs?status=" + "s" * 5000, {}, 422, "invalid_request"),
    ("GET", "/runs/%ED%A0%80", {}, 404, "unknown_run"),
    ("GET", "/runs/" + "r" * 6000, {}, 404, "unknown_run"),
    ("GET", "/runs/%00", {}, 404, "unknown_run"),
    ("GET", "/runs/" + "r" * 6000 + "/events", {}, 404, "unknown_run"),
    (
        "GET",
        "/runs/{run}/events?after=18446744073709551616",
        {"headers": {"Accept": "application/json"}},
        400,
        "bad_last_event_id",
    ),
    (
        "GET",
        "/runs/{run}/events",
        {"headers": {"Last-Event-ID": "1" * 400}},
        400,
        "bad_last_event_id",
    ),
    ("POST", "/runs/{run}/resume", {"json": {"approve": True}}, 409, "not_waiting"),
    ("POST", "/runs/{run}/resume", {"json": {"values": {"b": 1}}}, 422, "invalid_request"),
    ("POST", "/runs/{waiting}/resume", {"json": {"approve": "perhaps"}}, 422, "invalid_request"),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "values": [1]}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "values": "b=1"}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "reason": 5}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "gate": {"x": 1}}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "actor": ["a"]}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "other": 1}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "gate": "no-such-gate"}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "values": {"b": "many"}}},
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/runs/{waiting}/resume",
        {"json": {"approve": True, "values": {"zz": 1}}},
        422,
        "invalid_request",
    ),
    ("POST", "/runs/{waiting}/resume", {"json": {}}, 409, "decision_needed"),
    ("POST", "/runs/{waiting}/resume?wait=2", {"json": {"approve": True}}, 422, "invalid_request"),
    ("POST", "/runs/%ED%A0%80/resume", {"json": {"approve": True}}, 404, "unknown_run"),
    ("DELETE", "/runs/{run}", {}, 405, "method_not_allowed"),
    ("PUT", "/flows/add/runs", {"json": {}}, 405, "method_not_allowed"),
    ("GET", "/static/../../../../etc/passwd", {}, 404, "not_found"),
    ("GET", "/static/%2e%2e/%2e%2e/pyproject.toml", {}, 404, "not_found"),
    ("GET", "/nowhere/%ED%A0%80", {}, 404, "not_found"),
]


def test_hostile_requests_get_a_4xx_json_problem(live: Live) -> None:
    with live.client() as client:
        run = client.post("/flows/add/runs", json={"inputs": {"a": 1}}).json()["run_id"]
        waiting = client.post("/flows/gated/runs", json={"inputs": {"a": 1}}).json()
        assert waiting["status"] == "waiting", waiting
        wrong = []
        for method, path, arguments, status, code in HOSTILE:
            target = path.replace("{run}", run).replace("{waiting}", waiting["run_id"])
            response = client.request(method, target, **arguments)
            try:
                error = response.json()["error"]
                ok = (response.status_code, error["code"]) == (status, code) and bool(
                    error["message"]
                )
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                wrong.append(
                    f"{method} {target[:80]} {str(arguments)[:80]}: "
                    f"{response.status_code} {response.text[:200]}"
                )
        assert not wrong, "\n".join(wrong)
        # no hostile resume decided it
        assert wait_run(client, waiting["run_id"])["status"] == "waiting"
        assert client.get("/healthz").json()["status"] == "ok"
