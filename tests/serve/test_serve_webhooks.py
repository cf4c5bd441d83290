"""Webhooks of runs (engine/serve/webhooks.py): a real receiver on 127.0.0.1 gets signed POSTs when a run
waits at a gate and when it ends, a 500 is retried, a host outside http.allowed_hosts is refused with 422,
and the LangGraph API's `webhook` (through the real langgraph-sdk client) is honoured."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.schema import Command

from engine.serve.logs import LOGGER
from tests.serve.serve_helpers import GATED_FLOW, YARD, Live, wait_for

SECRET_ENV = "BLOCKYARD_TEST_WEBHOOK_SECRET"
SECRET = "s3cret-for-tests"
CONFIG = f"""
http:
  allowed_hosts: ["127.0.0.1"]
server:
  webhooks:
    secret_env: {SECRET_ENV}
    attempts: 3
"""


@dataclass
class Delivery:
    headers: dict[str, str]
    raw: bytes
    status: int  # what the receiver answered

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed


@dataclass
class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers the statuses of `script` in turn
    (then 200)."""

    url: str
    script: list[int] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)

    def answered(self, status: int) -> list[Delivery]:
        return [d for d in self.deliveries if d.status == status]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    lock = threading.Lock()
    made = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                status = made.script.pop(0) if made.script else 200
                made.deliveries.append(
                    Delivery({k.lower(): v for k, v in self.headers.items()}, raw, status)
                )
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: Any) -> None:  # quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    made.url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield made
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


@pytest.fixture
def hooked(
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    monkeypatch: pytest.MonkeyPatch,
) -> Live:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    root = make_yard({**YARD, "flows/gated.yaml": GATED_FLOW, "blockyard.yaml": CONFIG})
    return serve(root, watch=False, schedules=False)


def signed_right(delivery: Delivery) -> bool:
    timestamp = delivery.headers["x-blockyard-timestamp"]
    wanted = hmac.new(
        SECRET.encode(), timestamp.encode() + b"." + delivery.raw, hashlib.sha256
    ).hexdigest()
    fresh = abs(time.time() - int(timestamp)) < 120
    return fresh and hmac.compare_digest(
        delivery.headers["x-blockyard-signature"], f"sha256={wanted}"
    )


def test_a_finished_run_posts_its_outputs_signed(hooked: Live, receiver: Receiver) -> None:
    with hooked.client() as client:
        answer = client.post("/flows/add/runs", json={"inputs": {"a": 3}, "webhook": receiver.url})
        assert answer.status_code == 200, answer.text
        run_id = answer.json()["run_id"]
    [delivery] = wait_for(lambda: receiver.deliveries)
    assert signed_right(delivery)
    assert delivery.headers["content-type"] == "application/json"
    body = delivery.body
    assert (body["event"], body["run_id"], body["flow"], body["assistant_id"]) == (
        "run.ended",
        run_id,
        "add",
        "add",
    )
    assert (body["status"], body["outputs"], body["error"]) == ("finished", {"total": 5}, None)
    assert body["version"] == 1 and "gates" not in body
    time.sleep(0.3)
    assert len(receiver.deliveries) == 1  # one POST: no retry after a 200


def test_a_gated_run_posts_at_the_wait_and_again_at_the_end(
    hooked: Live, receiver: Receiver
) -> None:
    with hooked.client() as client:
        paused = client.post(
            "/flows/gated/runs", json={"inputs": {"a": 2}, "webhook": receiver.url}
        ).json()
        assert paused["status"] == "waiting"
        [waiting] = wait_for(lambda: receiver.deliveries)
        assert waiting.body["event"] == "run.waiting" and waiting.body["status"] == "waiting"
        assert waiting.body["run_id"] == paused["run_id"] and waiting.body["outputs"] is None
        [gate] = waiting.body["gates"]  # as the run's answer shows them in `waiting`
        assert waiting.body["step"] == "ask" and gate["value"]["message"] == "Add how much?"
        assert gate["interrupt_id"] == paused["waiting"][0]["interrupt_id"]
        done = client.post(
            f"/runs/{paused['run_id']}/resume", json={"approve": True, "values": {"b": 5}}
        ).json()
        assert done["status"] == "finished"
    _, ended = wait_for(lambda: receiver.deliveries if len(receiver.deliveries) == 2 else None)
    assert all(signed_right(d) for d in receiver.deliveries)
    assert (ended.body["event"], ended.body["status"], ended.body["outputs"]) == (
        "run.ended",
        "finished",
        {"total": 7},
    )
    assert waiting.headers["x-blockyard-delivery"] != ended.headers["x-blockyard-delivery"]


def test_a_500_is_retried_with_the_same_delivery_id(
    hooked: Live, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    receiver.script = [500]
    with hooked.client() as client:
        run_id = client.post(
            "/flows/add/runs", json={"inputs": {"a": 1}, "webhook": receiver.url}
        ).json()["run_id"]
    first, second = wait_for(lambda: receiver.deliveries if len(receiver.deliveries) == 2 else None)
    assert (first.status, second.status) == (500, 200)
    assert (first.headers["x-blockyard-attempt"], second.headers["x-blockyard-attempt"]) == (
        "1",
        "2",
    )
    assert first.headers["x-blockyard-delivery"] == second.headers["x-blockyard-delivery"]
    assert first.raw == second.raw and second.body["run_id"] == run_id and signed_right(second)
    time.sleep(0.3)
    assert len(receiver.deliveries) == 2
    logged = [(r.getMessage(), getattr(r, "kv", {})) for r in caplog.records if r.name == LOGGER]
    attempts = [
        (kv["run"], kv["attempt"], kv["outcome"])
        for message, kv in logged
        if message == "webhook_attempt"
    ]
    assert attempts == [
        (run_id, 1, "500"),
        (run_id, 2, "200"),
    ]  # every attempt recorded in the server log
    assert [kv["attempts"] for message, kv in logged if message == "webhook_delivered"] == [2]


def test_a_failing_receiver_gets_the_configured_attempts_and_the_run_still_finishes(
    hooked: Live, receiver: Receiver
) -> None:
    receiver.script = [503, 503, 503, 503]
    with hooked.client() as client:
        answer = client.post(
            "/flows/add/runs", json={"inputs": {"a": 1}, "webhook": receiver.url}
        ).json()
        assert answer["status"] == "finished"
        wait_for(lambda: len(receiver.deliveries) == 3, timeout=15)
        time.sleep(1.5)  # past the next backoff: no fourth attempt
        assert len(receiver.deliveries) == 3
        assert client.get(f"/runs/{answer['run_id']}").json()["status"] == "finished"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://169.254.169.254/latest/meta-data",
            "the webhook's host '169.254.169.254' is not in http.allowed_hosts",
        ),
        ("http://localhost:9/hook", "the webhook's host 'localhost' is not in http.allowed_hosts"),
        ("ftp://127.0.0.1/hook", "is not an http:// or https:// URL"),
    ],
)
def test_a_refused_url_is_a_422_and_no_run(hooked: Live, url: str, message: str) -> None:
    with hooked.client() as client:
        refused = client.post(
            "/flows/add/runs", json={"inputs": {"a": 1}, "run_id": "never", "webhook": url}
        )
        assert refused.status_code == 422
        problem = refused.json()["error"]
        assert problem["code"] == "webhook_refused" and problem["field"] == "webhook"
        assert message in problem["message"]
        assert client.get("/runs/never").status_code == 404


def test_without_allowed_hosts_every_webhook_is_refused(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], receiver: Receiver
) -> None:
    live = serve(make_yard(YARD), watch=False, schedules=False)
    with live.client() as client:
        refused = client.post("/flows/add/runs", json={"inputs": {"a": 1}, "webhook": receiver.url})
    assert refused.status_code == 422
    assert "none are allowed yet" in refused.json()["error"]["message"]


def test_without_a_secret_the_post_is_unsigned(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live], receiver: Receiver
) -> None:
    config = 'http:\n  allowed_hosts: ["127.0.0.1"]\n'
    live = serve(make_yard({**YARD, "blockyard.yaml": config}), watch=False, schedules=False)
    with live.client() as client:
        client.post("/flows/add/runs", json={"inputs": {"a": 1}, "webhook": receiver.url})
    [delivery] = wait_for(lambda: receiver.deliveries)
    assert "x-blockyard-signature" not in delivery.headers and delivery.body["status"] == "finished"


def test_a_named_secret_that_is_not_set_sends_nothing(
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    live = serve(make_yard({**YARD, "blockyard.yaml": CONFIG}), watch=False, schedules=False)
    with live.client() as client:
        assert (
            client.post(
                "/flows/add/runs", json={"inputs": {"a": 1}, "webhook": receiver.url}
            ).json()["status"]
            == "finished"
        )
    time.sleep(0.5)
    assert receiver.deliveries == []


def test_langgraph_sdk_runs_wait_with_a_webhook(hooked: Live, receiver: Receiver) -> None:
    client = get_sync_client(url=hooked.url + "/lg")
    values = client.runs.wait(None, "add", input={"a": 4}, webhook=receiver.url)
    # a plain run's values: its inputs and outputs
    assert isinstance(values, dict) and values["total"] == 6
    [delivery] = wait_for(lambda: receiver.deliveries)
    assert signed_right(delivery)
    assert (delivery.body["assistant_id"], delivery.body["status"], delivery.body["outputs"]) == (
        "add",
        "finished",
        {"total": 6},
    )


def test_langgraph_sdk_thread_run_with_a_refused_webhook_is_a_422(hooked: Live) -> None:
    client = get_sync_client(url=hooked.url + "/lg")
    thread = client.threads.create()
    with pytest.raises(httpx.HTTPStatusError, match=r"is not in http\.allowed_hosts") as refused:
        client.runs.create(
            thread["thread_id"], "add", input={"a": 1}, webhook="http://169.254.169.254/"
        )
    assert refused.value.response.status_code == 422
    assert "http.allowed_hosts" in refused.value.response.text


def test_langgraph_sdk_thread_gate_and_resume_post_twice(hooked: Live, receiver: Receiver) -> None:
    client = get_sync_client(url=hooked.url + "/lg")
    thread = client.threads.create()
    paused = client.runs.wait(thread["thread_id"], "gated", input={"a": 2}, webhook=receiver.url)
    assert "__interrupt__" in paused
    [waiting] = wait_for(lambda: receiver.deliveries)
    assert (waiting.body["event"], waiting.body["thread_id"]) == (
        "run.waiting",
        thread["thread_id"],
    )
    # no webhook: the start's
    client.runs.wait(thread["thread_id"], "gated", command=Command(resume={"b": 3}))
    _, ended = wait_for(lambda: receiver.deliveries if len(receiver.deliveries) == 2 else None)
    assert (ended.body["run_id"], ended.body["thread_id"]) == (
        waiting.body["run_id"],
        thread["thread_id"],
    )
    assert (ended.body["status"], ended.body["outputs"]) == ("finished", {"total": 5})
    assert all(signed_right(d) for d in receiver.deliveries)


def test_the_yards_notify_posts_every_run_of_its_flows_whoever_started_it(
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    notify = (
        f"notify:\n  - url: {receiver.url}?all=1\n"  # every flow, waiting and ended
        f"  - url: {receiver.url}?add=1\n    flows: [add]\n    on: [ended]\n"
    )
    root = make_yard({**YARD, "flows/gated.yaml": GATED_FLOW, "blockyard.yaml": CONFIG + notify})
    live = serve(root, watch=False, schedules=False)
    with live.client() as client:
        added = client.post(
            "/flows/add/runs", json={"inputs": {"a": 3}}
        ).json()  # no webhook of its own
        assert added["status"] == "finished"
        posted = wait_for(lambda: receiver.deliveries if len(receiver.deliveries) == 2 else None)
        assert sorted(d.headers.get("x-blockyard-attempt", "") for d in posted) == ["1", "1"]
        assert all(signed_right(d) for d in posted)
        assert {d.body["run_id"] for d in posted} == {added["run_id"]}
        assert {d.body["event"] for d in posted} == {"run.ended"}
        # a gate: the subscription of every flow posts the wait; the one of `add` is not told
        paused = client.post("/flows/gated/runs", json={"inputs": {"a": 2}}).json()
        assert paused["status"] == "waiting"
        wait_for(lambda: len(receiver.deliveries) == 3)
        waiting = receiver.deliveries[2].body
        assert (waiting["event"], waiting["run_id"]) == ("run.waiting", paused["run_id"])
        # a run's own webhook besides the yard's: one POST each, the same URL once
        client.post(
            "/flows/add/runs", json={"inputs": {"a": 1}, "webhook": f"{receiver.url}?all=1"}
        )
        wait_for(lambda: len(receiver.deliveries) == 5)
    time.sleep(0.3)
    assert len(receiver.deliveries) == 5


BAD_NOTIFY = (
    'http:\n  allowed_hosts: ["hooks.example.com"]\nnotify:\n'
    "  - url: http://169.254.169.254/latest\n"
    "  - url: https://hooks.example.com/x\n    flows: [ad]\n"
)


def test_validate_refuses_a_notify_url_the_server_may_not_post_to(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    from engine.cli import main  # the command as a user runs it

    root = make_yard(
        {
            **YARD,
            "blockyard.yaml": BAD_NOTIFY,
        }
    )
    assert main(["validate", "--root", str(root)]) == 1


def test_validate_names_the_notify_problems_at_their_lines(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    from engine.definitions.project import load_project  # the validator's own entry points
    from engine.validate.semantic import check_project

    root = make_yard(
        {
            **YARD,
            "blockyard.yaml": BAD_NOTIFY,
        }
    )
    found = [
        (d.code, d.line, d.message)
        for d in check_project(load_project(root))
        if d.code in ("BY518", "BY519")
    ]
    assert found == [
        (
            "BY518",
            4,
            "notify: the webhook's host '169.254.169.254' is not in http.allowed_hosts of blockyard.yaml "
            "(webhooks reach only the hosts the http_request tool may)",
        ),
        ("BY519", 6, "notify: unknown flow 'ad' (did you mean 'add'?)"),
    ]
