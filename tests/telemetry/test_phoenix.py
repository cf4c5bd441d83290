"""The end-to-end check of OpenTelemetry export against a real Arize Phoenix (tests/support/phoenix.py: from
PyPI, pinned, in a venv of its own, offline, on free ports): a real `blockyard serve` and a `blockyard run`
send their runs over OTLP/HTTP, the model being a loopback OpenAI-compatible server that reports usage
(tests/support/usage_llm.py); the spans are read back through Phoenix's REST API and checked: one trace
per run, the tree of the flow, the model calls' tokens as the server reported them, the caller's
traceparent as the parent of the served run's root."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.serve_helpers import free_socket
from tests.support import processes
from tests.support.loopback import LOOPBACK
from tests.support.phoenix import Phoenix, running
from tests.support.usage_llm import UsageLLM

REPO = Path(__file__).resolve().parents[2]
# what a run exports does not depend on where its state database is: Phoenix (minutes of a core to start)
# runs in the SQLite pass only
pytestmark = pytest.mark.sqlite_only("a trace does not depend on the state database's backend")
PROJECT = "blockyard-phoenix-test"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
SAY = """
block: say
kind: llm
inputs: {topic: {type: string}}
outputs: {text: {type: string}}
prompt: {system: You answer in one sentence., user: "Tell me about {{ topic }}."}
"""
FIVE = """
flow: five
inputs: {topic: {type: string, default: bees}}
outputs: [text, texts]
steps:
  - {id: first, uses: say, with: {topic: "{{ inputs.topic }}"}}
  - id: each
    map: {items: "['the hive', 'the waggle dance of foragers']", as: part, uses: say, with: {topic: "{{ part }}"},
          collect: texts}
  - {id: again, uses: say, with: {topic: "{{ inputs.topic }} and flowers and summer"}}
  - {id: wrap, flow: brief, with: {topic: "{{ inputs.topic }} in winter"}}
"""
BRIEF = """
flow: brief
inputs: {topic: {type: string}}
outputs: [text]
steps:
  - {id: say, uses: say, with: {topic: "{{ inputs.topic }}"}}
"""
TREE = (
    "invoke_workflow five(step again(chat usage-model),step each(step each(chat usage-model),"
    "step each(chat usage-model)),step first(chat usage-model),step wrap(step wrap.say(chat usage-model)))"
)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with running(tmp_path_factory.mktemp("phoenix")) as started:
        yield started


@pytest.fixture(scope="module")
def llm() -> Iterator[UsageLLM]:
    with UsageLLM(cached_ratio=0.25) as server:
        yield server


@pytest.fixture(scope="module")
def yard(tmp_path_factory: pytest.TempPathFactory, phoenix: Phoenix, llm: UsageLLM) -> Path:
    root = tmp_path_factory.mktemp("yard")
    files = {
        "blockyard.yaml": (
            f"models:\n  default: {{provider: openai, base_url: '{llm.base_url}', name: usage-model}}\n"
            f"telemetry:\n  endpoint: {phoenix.url}\n  service_name: {PROJECT}\n"
        ),
        "blocks/say.yaml": SAY,
        "flows/five.yaml": FIVE,
        "flows/brief.yaml": BRIEF,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    return root


def _child_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update({"PYTHONPATH": str(REPO), "OTEL_BSP_SCHEDULE_DELAY": "100"})
    env.pop("OPENAI_API_KEY", None)
    env.pop("BLOCKYARD_TOKEN", None)
    return env


@pytest.fixture(scope="module")
def runs(yard: Path, llm: UsageLLM, phoenix: Phoenix) -> dict[str, Any]:
    """Two runs of `five`: one started over HTTP on a real `blockyard serve` with a caller's traceparent,
    one by `blockyard run`; with the usage the model server reported for each."""
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    log = yard / "serve.log"
    with log.open("w") as err:
        server = processes.Popen(
            [
                sys.executable,
                "-m",
                "engine",
                "serve",
                "--no-reload",
                "--grace",
                "5",
                "--port",
                str(port),
                "--root",
                str(yard),
            ],
            stdout=err,
            stderr=err,
            text=True,
            env=_child_env(),
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1, verify=LOOPBACK).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        served = httpx.post(
            f"{url}/flows/five/runs",
            json={"inputs": {}},
            timeout=120,
            verify=LOOPBACK,
            headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
        ).json()
        assert served["status"] == "finished", served
        served_usage = list(llm.reported())
    finally:
        server.terminate()  # a graceful stop: its last spans are sent on the way out
        server.wait(timeout=60)
    assert "Traceback" not in log.read_text(), log.read_text()
    before = len(llm.calls)
    done = processes.run(
        [sys.executable, "-m", "engine", "run", "five", "--root", str(yard), "--json"],
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    ran = [json.loads(line) for line in done.stdout.splitlines() if line.strip()][-1]
    assert "Traceback" not in done.stderr, done.stderr
    return {
        "served": served["run_id"],
        "served_usage": served_usage,
        "ran": ran["run_id"],
        "ran_usage": [call.usage for call in llm.calls[before:]],
    }


def _stored(phoenix: Phoenix, runs: dict[str, Any]) -> list[dict[str, Any]]:
    """Phoenix's spans of both runs, once it has stored all of them (it inserts in batches)."""
    deadline = time.monotonic() + 90
    while True:
        spans = phoenix.spans(PROJECT)
        roots = [span for span in spans if span["name"] == "invoke_workflow five"]
        if len(roots) == 2 and len(spans) == 2 * 13:
            return spans
        assert time.monotonic() < deadline, (
            f"Phoenix holds {len(spans)} spans: {sorted(s['name'] for s in spans)}"
        )
        time.sleep(0.5)


def _shape(spans: list[dict[str, Any]], span: dict[str, Any]) -> str:
    children = sorted(
        _shape(spans, child) for child in spans if child["parent_id"] == span["context"]["span_id"]
    )
    return str(span["name"]) + (f"({','.join(children)})" if children else "")


def test_phoenix_shows_each_run_as_one_trace_shaped_like_its_flow(
    phoenix: Phoenix, runs: dict[str, Any]
) -> None:
    spans = _stored(phoenix, runs)
    project = [p["name"] for p in phoenix.get("/v1/projects")["data"]]
    # Phoenix filed them under the service's name (openinference.project.name)
    assert PROJECT in project
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)
    assert len(by_trace) == 2  # one trace per run
    for run_id in (runs["served"], runs["ran"]):
        (root,) = [
            s
            for s in spans
            if s["name"] == "invoke_workflow five" and s["attributes"]["blockyard.run_id"] == run_id
        ]
        trace = by_trace[root["context"]["trace_id"]]
        assert len(trace) == 13
        assert _shape(trace, root) == TREE
        assert root["span_kind"] == "CHAIN"
        assert root["attributes"]["gen_ai.operation.name"] == "invoke_workflow"
        assert root["attributes"]["blockyard.run.status"] == "finished"
        assert root["status_code"] == "UNSET"


def test_the_model_calls_carry_the_tokens_the_server_reported(
    phoenix: Phoenix, runs: dict[str, Any]
) -> None:
    spans = _stored(phoenix, runs)
    for run_id, usage in ((runs["served"], runs["served_usage"]), (runs["ran"], runs["ran_usage"])):
        (root,) = [
            s
            for s in spans
            if s["name"] == "invoke_workflow five" and s["attributes"]["blockyard.run_id"] == run_id
        ]
        chats = [
            s
            for s in spans
            if s["context"]["trace_id"] == root["context"]["trace_id"]
            and s["name"] == "chat usage-model"
        ]
        assert len(chats) == len(usage) == 5
        got = sorted(
            (
                s["attributes"]["gen_ai.usage.input_tokens"],
                s["attributes"]["gen_ai.usage.output_tokens"],
                s["attributes"]["gen_ai.usage.cache_read.input_tokens"],
            )
            for s in chats
        )
        assert got == sorted((u.input_tokens, u.output_tokens, u.cached_tokens) for u in usage)
        # the calls differ: each span has its own call's counts
        assert len({entry[0] for entry in got}) > 1
        for chat in chats:
            attributes = chat["attributes"]
            assert chat["span_kind"] == "LLM"
            assert attributes["gen_ai.operation.name"] == "chat"
            assert attributes["gen_ai.provider.name"] == "openai"
            assert attributes["gen_ai.request.model"] == "usage-model"
            assert attributes["llm.token_count.prompt"] == attributes["gen_ai.usage.input_tokens"]
        assert root["attributes"]["blockyard.usage.input_tokens"] == sum(
            u.input_tokens for u in usage
        )


def test_the_callers_traceparent_is_the_parent_of_the_served_run(
    phoenix: Phoenix, runs: dict[str, Any]
) -> None:
    spans = _stored(phoenix, runs)
    (served,) = [
        s
        for s in spans
        if s["name"] == "invoke_workflow five"
        and s["attributes"]["blockyard.run_id"] == runs["served"]
    ]
    assert served["context"]["trace_id"] == CALLER_TRACE
    assert served["parent_id"] == CALLER_SPAN
    (ran,) = [
        s
        for s in spans
        if s["name"] == "invoke_workflow five"
        and s["attributes"]["blockyard.run_id"] == runs["ran"]
    ]
    assert ran["parent_id"] is None and ran["context"]["trace_id"] != CALLER_TRACE
