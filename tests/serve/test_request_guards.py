"""The server's request guards, each answer pinned to what a client is told (engine/serve/bodies.py, hosts.py,
auth.py, middleware.py), against a real server on 127.0.0.1: which bodies count as JSON, each refusal of a
value JSON allows but the engine cannot keep (its field and its message), bad JSON, the problems of a body
of the wrong shape, the documented request body, a refusal's own bytes, and the names a server answers to."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.core.errors import UsageError
from engine.serve import auth, hosts
from engine.serve.bodies import CROSS_ORIGIN, INT64_MAX, NOT_AN_OBJECT, ResumeRequest
from engine.serve.logs import LOGGER
from engine.serve.server import Settings
from tests.serve.serve_helpers import YARD, Live, start_live
from tests.serve.test_serve_hostile import ECHO_FLOW, HOSTILE_YARD, port_of, raw_exchange

SURROGATE = (
    "a lone UTF-16 surrogate (\\ud800 to \\udfff without its pair), which is not valid Unicode"
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("guards")
    for name, text in {**YARD, "flows/echo.yaml": ECHO_FLOW}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")
    server = start_live(Settings(root=root, watch=False, schedules=False, grace=5.0, poll=0.1))
    yield server
    server.stop()


def post(
    live: Live, body: bytes | str, content_type: str | None = "application/json"
) -> httpx.Response:
    headers = {"Content-Type": content_type} if content_type is not None else {}
    with live.client() as client:
        return client.post("/flows/echo/runs", content=body, headers=headers)


def refusal(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    return error


# ---- which bodies are JSON ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "APPLICATION/JSON",
        "application/json;charset=utf-8",
        "application/json; charset=utf-8",
        "application/json; charset=utf-8; profile=x",
        "application/vnd.blockyard+json",
        "application/merge-patch+JSON",
    ],
)
def test_json_by_its_media_type_is_read(live: Live, content_type: str) -> None:
    response = post(live, '{"inputs": {"n": 2}}', content_type)
    assert response.status_code == 200, (content_type, response.text)
    assert response.json()["status"] == "finished"


OTHER_TYPES = [
    "text/plain",
    "text/plain;charset=UTF-8",
    "text/+json",
    "application/json-seq",
    "application/x-www-form-urlencoded",
    "json",
    None,
    "application/jsonp",
    "image/svg+json+xml",
]


@pytest.mark.parametrize("content_type", OTHER_TYPES)
def test_a_json_body_of_another_media_type_is_read_as_json(
    live: Live, content_type: str | None
) -> None:
    # as LangGraph's server does: a proxy (agent-chat-ui's) forwards JSON as text/plain;charset=UTF-8
    response = post(live, '{"inputs": {"n": 2}}', content_type)
    assert response.status_code == 200, (content_type, response.text)
    assert response.json()["status"] == "finished"


@pytest.mark.parametrize("content_type", OTHER_TYPES)
def test_a_body_of_another_media_type_that_is_not_json_is_refused(
    live: Live, content_type: str | None
) -> None:
    for body in ("inputs=1", b"\xff\xfe{", "[" * 200_000, "{'inputs': {}}"):
        error = refusal(post(live, body, content_type), 422)
        assert error == {"code": "invalid_request", "message": NOT_AN_OBJECT}, (
            content_type,
            body[:20],
        )


def test_a_page_on_an_origin_not_trusted_must_say_its_body_is_json(live: Live) -> None:
    # a browser POSTs text/plain across origins without a preflight: no web page may start runs that way
    with live.client() as client:
        for origin in ("http://evil.example", "null", "http://127.0.0.1:1"):
            refused = client.post(
                "/flows/echo/runs",
                content='{"inputs": {}}',
                headers={"Content-Type": "text/plain", "Origin": origin},
            )
            assert refusal(refused, 422) == {"code": "invalid_request", "message": CROSS_ORIGIN}
        same = client.post(
            "/flows/echo/runs",
            content='{"inputs": {}}',  # the server's own page is trusted
            headers={"Content-Type": "text/plain", "Origin": live.url},
        )
        assert same.status_code == 200, same.text
        typed = client.post(
            "/flows/echo/runs",
            content='{"inputs": {}}',  # JSON said so: CORS decides
            headers={"Content-Type": "application/json", "Origin": "http://evil.example"},
        )
        assert typed.status_code == 200, typed.text


def test_an_empty_or_null_body_is_no_body_and_anything_but_an_object_is_refused(live: Live) -> None:
    # no body, no content type: the defaults
    assert post(live, "", None).json()["status"] == "finished"
    assert post(live, "  \n", "text/plain").json()["status"] == "finished"
    assert post(live, "null").json()["status"] == "finished"
    for body in ("[1, 2]", '"text"', "7"):
        assert refusal(post(live, body), 422)["message"] == NOT_AN_OBJECT


# ---- bad JSON ------------------------------------------------------------------------------------


def test_bad_json_is_a_400_saying_what_is_wrong(live: Live) -> None:
    cases = {
        b'{"inputs": }': "the request body is not valid JSON: Expecting value",
        b'{"inputs": {"n": 1}': "the request body is not valid JSON: Expecting ',' delimiter",
        '{"inputs": {"name": "caf\xe9"}}'.encode(
            "latin-1"
        ): "the request body is not valid JSON: it is not UTF-8",
        b"[" * 200_000: "the request body is not valid JSON: nested too deeply",
    }
    for body, message in cases.items():
        assert refusal(post(live, body), 400) == {"code": "malformed_json", "message": message}, (
            body[:40]
        )


# ---- values JSON allows and the engine cannot keep -----------------------------------------------


def test_each_value_the_engine_cannot_keep_is_refused_naming_its_field(live: Live) -> None:
    cases = {
        '{"inputs": {"name": "\\ud800"}}': ("inputs.name", f"the text holds {SURROGATE}"),
        '{"inputs": {"data": {"\\udfff": 1}}}': (
            "inputs.data.\\udfff",
            f"the key holds {SURROGATE}",
        ),
        '{"inputs": {"n": 9223372036854775808}}': (
            "inputs.n",
            "the integer is beyond 64 bits (from -9223372036854775808 to 9223372036854775807)",
        ),
        '{"inputs": {"data": [1, -9223372036854775809]}}': (
            "inputs.data[1]",
            "the integer is beyond 64 bits (from -9223372036854775808 to 9223372036854775807)",
        ),
        '{"inputs": {"n": NaN}}': (
            "inputs.n",
            "the number is not finite (NaN, Infinity and numbers beyond 1.8e308 are not JSON values)",
        ),
        '{"inputs": {"data": {"x": [-Infinity]}}}': (
            "inputs.data.x[0]",
            "the number is not finite (NaN, Infinity and numbers beyond 1.8e308 are not JSON values)",
        ),
        '{"inputs": {"n": 1e999}}': (
            "inputs.n",
            "the number is not finite (NaN, Infinity and numbers beyond 1.8e308 are not JSON values)",
        ),
    }
    for body, (field, problem) in cases.items():
        error = refusal(post(live, body), 422)
        assert error == {
            "code": "invalid_request",
            "message": f"{field}: {problem}",
            "field": field,
        }, body


def test_the_limits_themselves_are_kept(live: Live) -> None:
    body = {
        "inputs": {
            "data": {"big": INT64_MAX, "small": -INT64_MAX - 1, "yes": True, "real": 1.5e308}
        }
    }
    response = post(live, json.dumps(body))
    assert response.status_code == 200, response.text


def test_nesting_is_refused_past_64_levels(live: Live) -> None:
    def nested(levels: int) -> str:  # the body is level 0, `inputs` 1, `data` 2; each list adds one
        return '{"inputs": {"data": ' + "[" * levels + "1" + "]" * levels + "}}"

    assert post(live, nested(62)).status_code == 200  # the 1 at level 64
    error = refusal(post(live, nested(63)), 422)
    assert (
        error["message"]
        == "inputs.data" + "[0]" * 63 + ": the value is nested deeper than 64 levels"
    )


def test_a_long_key_is_shown_cut_and_a_key_of_80_characters_whole(live: Live) -> None:
    for key, shown in (
        ("k" * 80, "k" * 80),
        ("k" * 81, "k" * 77 + "..."),
        ("k" * 300, "k" * 77 + "..."),
    ):
        error = refusal(post(live, json.dumps({"inputs": {"data": {key: 2**70}}})), 422)
        assert error["field"] == f"inputs.data.{shown}", len(key)


def test_a_body_of_the_wrong_shape_names_every_problem(live: Live) -> None:
    error = refusal(
        post(live, json.dumps({"inputs": {}, "nope": 1, "run_id": 5, "trace": "maybe"})), 422
    )
    assert error["code"] == "invalid_request"
    assert error["message"].split("; ") == [
        "body.run_id: Input should be a valid string",
        "body.trace: Input should be a valid boolean, unable to interpret input",
        "body.nope: Extra inputs are not permitted",
    ]


def test_the_documented_request_body_is_optional_json(live: Live) -> None:
    with live.client() as client:
        document = client.get("/openapi.json").json()
    body = document["paths"]["/flows/{name}/runs"]["post"]["requestBody"]
    assert body["required"] is False and list(body["content"]) == ["application/json"]
    schema = body["content"]["application/json"]["schema"]
    assert {"inputs", "run_id", "output_dir", "durability", "trace"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


# ---- a decision's body ---------------------------------------------------------------------------


def test_a_decision_resumes_with_its_gate_actor_values_and_raised_budget() -> None:
    full = ResumeRequest(
        decision="reject",
        values={"tip": 5},
        reason="too much",
        gate="ask",
        actor="ada",
        budget={"tokens": 50000},
    )
    assert full.resume() == {
        "approve": False,
        "values": {"tip": 5},
        "reason": "too much",
        "gate": "ask",
        "actor": "ada",
        "budget": {"tokens": 50000},
    }
    assert ResumeRequest(approve=True).resume() == {
        "approve": True,
        "values": None,
        "reason": None,
        "gate": None,
        "actor": None,
    }
    assert ResumeRequest(decision="approve").chosen() == "approve"
    assert ResumeRequest(approve=False).chosen() == "reject"
    assert ResumeRequest(budget={"cost_usd": 1.0}).resume() == {"budget": {"cost_usd": 1.0}}
    assert ResumeRequest().resume() == {} and ResumeRequest(budget={}).resume() == {}


# ---- a refusal's own bytes and the names a server answers to -------------------------------------


def test_a_refusal_is_compact_utf_8_json_of_its_exact_length(live: Live) -> None:
    # the middleware writes this answer itself (no app behind it): a Host header with bytes beyond ASCII
    head = "GET /runs HTTP/1.1\r\nHost: é.example\r\nConnection: close\r\n\r\n".encode()
    status, body = raw_exchange(live, head)
    assert status == 421
    # what ASGI hands over: the header's bytes as latin-1
    shown = "é.example".encode().decode("latin-1")
    expected = {
        "error": {
            "code": "host_not_allowed",
            "message": f"this server does not answer Host '{shown}': "
            "call it by its own address, or add the name to server.allowed_hosts in blockyard.yaml",
        }
    }
    assert body == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
    headers = answer_headers(live, head)
    assert headers["content-type"] == "application/json" and int(headers["content-length"]) == len(
        body
    )


def answer_headers(live: Live, head: bytes) -> dict[str, str]:
    """The header lines of the server's answer to `head`, by lower-case name."""
    with socket.create_connection(("127.0.0.1", port_of(live)), timeout=10) as sock:
        sock.sendall(head)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    lines = received.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    return {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines)
    }


def test_a_bind_address_is_named_as_a_host_header_names_it() -> None:
    assert hosts.bracketed("::1") == "[::1]"
    assert hosts.bracketed(" FE80::1 ") == "[fe80::1]"
    assert hosts.bracketed("[::1]") == "[::1]"
    assert hosts.bracketed("Blockyard.LAN") == "blockyard.lan"
    assert hosts.bracketed("10.0.0.7") == "10.0.0.7"
    # a server bound to an IPv6 address answers that address in brackets, with or without its port
    assert hosts.host_allowed("[fe80::1]:9000", [], "FE80::1", 9000)
    assert hosts.host_allowed("[FE80::1]", [], "fe80::1", 9000)
    assert not hosts.host_allowed("[fe80::2]:9000", [], "fe80::1", 9000)
    assert hosts.host_allowed("blockyard.lan:9000", [], "Blockyard.LAN", 9000)


def test_the_token_is_the_whole_rest_of_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    assert auth.authorized("Bearer two words", "two words")
    assert auth.authorized("bearer  s3cret ", "s3cret")
    assert not auth.authorized("Bearer two", "two words") and not auth.authorized(
        "Token s3cret", "s3cret"
    )
    assert auth.api_key_matches(" s3cret ", "s3cret") and not auth.api_key_matches(
        "s3cre", "s3cret"
    )
    monkeypatch.setenv(auth.TOKEN_ENV, "  from-env  ")
    assert auth.server_token("127.0.0.1") == "from-env"
    assert auth.server_token("0.0.0.0", {auth.TOKEN_ENV: "given"}) == "given"
    monkeypatch.delenv(auth.TOKEN_ENV)
    assert auth.server_token("[::1]") is None and auth.server_token("localhost") is None
    with pytest.raises(UsageError, match=r"refusing to listen on 0\.0\.0\.0 without a token"):
        auth.server_token("0.0.0.0")


# ---- the token's refusals, the body limit at its edge, the access log ----------------------------


def test_a_missing_and_a_wrong_token_are_told_apart(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve(make_yard(HOSTILE_YARD), watch=False, schedules=False, token="s3cret")
    with live.client() as client:
        missing = client.get("/runs")
        wrong = client.get("/runs", headers={"Authorization": "Bearer nope"})
    assert refusal(missing, 401) == {
        "code": "unauthorized",
        "message": "this server needs a token: send `Authorization: Bearer <BLOCKYARD_TOKEN>`",
    }
    assert refusal(wrong, 401) == {"code": "unauthorized", "message": "the token is wrong"}
    assert missing.headers["www-authenticate"] == wrong.headers["www-authenticate"] == "Bearer"


def test_a_body_of_exactly_the_limit_is_read_and_chunks_count_together(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    live = serve(
        make_yard({**HOSTILE_YARD, "blockyard.yaml": "server:\n  max_body_bytes: 2048\n"}),
        watch=False,
        schedules=False,
    )
    head = '{"inputs": {"name": "'
    body = head + "y" * (2048 - len(head) - 3) + '"}}'
    assert len(body) == 2048
    assert post(live, body).status_code == 200
    assert refusal(post(live, body + " "), 413)["code"] == "body_too_large"
    # chunks of 1000 bytes, each well under the limit, sent apart: the third passes it, counted together
    start = (
        b"POST /flows/echo/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port_of(live)), timeout=20) as sock:
        sock.sendall(start)
        for _ in range(3):
            sock.sendall(b"3e8\r\n" + b"x" * 1000 + b"\r\n")
            time.sleep(0.2)  # each chunk its own read by the server
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413") and b'"body_too_large"' in answer


def test_each_request_is_one_access_log_line_of_method_path_status_and_time(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER), live.client() as client:
        client.get("/runs?secret=1", headers={"Authorization": "Bearer not-logged"})
        client.post("/flows/echo/runs", content="[1]", headers={"Content-Type": "application/json"})
        deadline = time.monotonic() + 10
        while (
            len([r for r in caplog.records if r.getMessage() == "request"]) < 2
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
    lines = [record.__dict__["kv"] for record in caplog.records if record.getMessage() == "request"]
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("GET", "/runs", 200),
        ("POST", "/flows/echo/runs", 422),
    ]
    for line in lines:
        assert set(line) == {
            "method",
            "path",
            "status",
            "ms",
        }  # never the query, the headers or the body
        assert isinstance(line["ms"], float) and 0 < line["ms"] < 10_000
