"""docs/troubleshooting.md quotes what the product prints today: each message below is run here — the real
CLI in-process, a real server on 127.0.0.1, a second process holding the SQLite write lock — and must come
out word for word, and the page must quote it (with the example values it shows in place of this run's).

A message that changes fails here twice over: the product no longer prints the quote, and the page still
shows the old one. Change both, here and on the page."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.cli import main
from engine.serve.server import Settings
from engine.state.database import TIMEOUT_ENV
from tests.serve.serve_helpers import Live, start_live
from tests.support.cli import Cli

PAGE = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"

# Each message as a template: `{name}` where the product puts a value of this run (a folder, a run id, ...).
MESSAGES = {
    "no yard": "error: no yard here ({dir}): no blockyard.yaml, flows/ or blocks/ — run in a yard or pass --root",
    "no yard, validate": "error: no yard here: no blockyard.yaml, blocks/ or flows/ in {dir} or above it; pass --root, "
    "or create one with `blockyard init`",
    "unknown block": "flows/support.yaml:5:11: error BY210 step 'answer' uses unknown block 'answr' "
    "(did you mean 'answer'?)",
    "unknown input": "error: flow 'hello': unknown input 'nme' (did you mean 'name'?); its inputs are name",
    "missing input": "error: flow 'support': missing input 'ticket' (string)",
    "api key": "error: run {run} failed at step 'reply' (block 'answer'): model profile 'default' (openai, model "
    "'gpt-4o-mini') needs an API key: set the environment variable OPENAI_API_KEY",
    "bad output": "error: run {run} failed at step 'parse': block 'parse' got output from mock model 'mock' that does "
    "not match its outputs, even after a retry: at 'amount': 'still twelve' is not of type 'integer'",
    "locked": "error: run: the state database {db} is locked by another process (waited {wait} s for a write lock; "
    "BLOCKYARD_DB_TIMEOUT=SECONDS changes how long)",
    "gate needs a decision": "error: run {run} is waiting for an approval: decide it with `blockyard resume {run} "
    "--approve` or `--reject`",
    "gate needs --as": "error: gate 'refund' may only be decided by grace: say who you are with --as NAME",
    "gate approver": "error: 'bob' may not decide gate 'refund': its approvers are grace",
    "gate field type": "error: gate 'refund': field 'amount' must be a number, got string 'five'",
    "gate field name": "error: gate 'refund' has no field 'amont' (did you mean 'amount'?); its fields: amount",
    "gate decided": "error: gate 'refund' of run {run} was already approved by grace at {time}; run {run} is finished, "
    "not waiting for an approval decision",
    "421": '{{"error":{{"code":"host_not_allowed","message":"this server does not answer Host \'evil.example\': '
    'call it by its own address, or add the name to server.allowed_hosts in blockyard.yaml"}}}}',
    "413 body": '{{"error":{{"code":"body_too_large","message":"the request body is larger than {body_limit} bytes '
    '(server.max_body_bytes in blockyard.yaml)"}}}}',
    "413 inputs": '{{"error":{{"code":"inputs_too_large","message":"the run\'s inputs take {size} bytes as JSON; the '
    'limit is {input_limit} (server.max_input_bytes in blockyard.yaml)"}}}}',
    "409 run_exists": '{{"error":{{"code":"run_exists","message":"run id \'{run}\' is already taken"}}}}',
    "409 not_waiting": '{{"error":{{"code":"not_waiting","message":"run {run} is finished, not waiting for an '
    'approval decision"}}}}',
    "409 already_decided": '{{"error":{{"code":"already_decided","message":"gate \'refund\' of run {run} was already '
    "approved by grace at {time}; run {run} is finished, not waiting for an approval "
    'decision"}}}}',
    "409 not_resumable": '{{"error":{{"code":"not_resumable","message":"run {run} is finished; nothing to resume"}}}}',
}

# The values the page shows where this run has its own
SHOWN = {
    "dir": "/home/ada/notes",
    "run": "1m8gjm0sp4fgrq",
    "db": "/home/ada/support-desk/.blockyard/state.db",
    "wait": "30",
    "time": "2026-11-28T08:00:49.035Z",
    "body_limit": "4194304",
    "size": "1500000",
    "input_limit": "1048576",
}
SHOWN_FOR = {
    "409 run_exists": {"run": "ticket-1"},
    "409 not_waiting": {"run": "ticket-1"},
    "409 already_decided": {"run": "ticket-1"},
    "409 not_resumable": {"run": "ticket-1"},
}

YARD = {
    "blockyard.yaml": """
        models:
          default: {provider: openai, name: gpt-4o-mini, api_key_env: OPENAI_API_KEY}
          strict:
            provider: mock
            replies:
              parse: [{amount: "twelve"}, {amount: "still twelve"}]
        server: {max_body_bytes: 2000, max_input_bytes: 500}
    """,
    "blocks/answer.yaml": """
        block: answer
        kind: llm
        inputs: {ticket: {type: string}}
        outputs: {reply: {type: string}}
        prompt: {user: "Answer {{ ticket }}"}
    """,
    "blocks/parse.yaml": """
        block: parse
        kind: llm
        inputs: {text: {type: string}}
        outputs: {amount: {type: integer}}
        prompt: {user: "The amount in {{ text }}"}
        model: strict
    """,
    "blocks/greet.yaml": """
        block: greet
        kind: transform
        inputs: {name: {type: string}}
        outputs: {greeting: {type: string}}
        compute: {greeting: "'Hello ' ~ name"}
    """,
    "flows/hello.yaml": """
        flow: hello
        inputs: {name: {type: string, default: World}}
        outputs: [greeting]
        steps:
          - {id: greet, uses: greet, with: {name: "{{ inputs.name }}"}}
    """,
    "flows/support.yaml": """
        flow: support
        inputs: {ticket: {type: string}}
        outputs: [reply]
        steps:
          - {id: reply, uses: answer, with: {ticket: "{{ inputs.ticket }}"}}
    """,
    "flows/parse.yaml": """
        flow: parse
        inputs: {text: {type: string}}
        outputs: [amount]
        steps:
          - {id: parse, uses: parse, with: {text: "{{ inputs.text }}"}}
    """,
    "flows/refund.yaml": """
        flow: refund
        outputs: [amount]
        steps:
          - id: refund
            approval:
              message: Refund?
              fields: {amount: {type: number}}
              approvers: [grace]
              on_reject: fail
    """,
}

TYPO = """flow: support
inputs: {ticket: {type: string}}
steps:
  - id: answer
    uses: answr
"""


def quoted(name: str, **values: str) -> str:
    """Message `name` with this run's values; asserts first that the page quotes it with its own."""
    shown = MESSAGES[name].format(**{**SHOWN, **SHOWN_FOR.get(name, {})})
    assert shown in PAGE.read_text(encoding="utf-8"), (
        f"docs/troubleshooting.md no longer quotes: {shown}"
    )
    return MESSAGES[name].format(**values)


def test_every_message_is_quoted_on_the_page() -> None:
    missing = [
        name
        for name in MESSAGES
        if MESSAGES[name].format(**{**SHOWN, **SHOWN_FOR.get(name, {})})
        not in PAGE.read_text(encoding="utf-8")
    ]
    assert missing == []


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(YARD)


def test_no_yard_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "notes"
    empty.mkdir()
    monkeypatch.chdir(empty)
    for args, name in ((["run", "hello"], "no yard"), (["validate"], "no yard, validate")):
        capsys.readouterr()
        assert main(args) == 2
        assert capsys.readouterr().err == quoted(name, dir=str(empty.resolve())) + "\n"


def test_an_unknown_block_and_wrong_inputs(yard: Path, cli: Cli) -> None:
    (yard / "flows" / "support.yaml").write_text(TYPO, encoding="utf-8")
    for args in (["validate"], ["run", "support", "--input", "ticket=hi"]):
        outcome = cli(yard, *args)  # validate prints its diagnostics on stdout, run on stderr
        assert outcome.code == 1 and quoted("unknown block") + "\n" in outcome.out + outcome.err, (
            outcome.err
        )
    (yard / "flows" / "support.yaml").write_text(
        textwrap.dedent(YARD["flows/support.yaml"]).lstrip(), encoding="utf-8"
    )
    outcome = cli(yard, "run", "hello", "--input", "nme=Ada")
    assert (outcome.code, outcome.err) == (2, quoted("unknown input") + "\n")
    outcome = cli(yard, "run", "support")
    assert (outcome.code, outcome.err) == (2, quoted("missing input") + "\n")


def test_a_missing_api_key_and_a_bad_model_answer(
    yard: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outcome = cli(yard, "run", "support", "--input", "ticket=hi", "--run-id", "keyless")
    assert outcome.code == 1 and quoted("api key", run="keyless") + "\n" in outcome.err, outcome.err
    outcome = cli(yard, "run", "parse", "--input", "text=twelve euros", "--run-id", "parsed")
    assert outcome.code == 1 and quoted("bad output", run="parsed") + "\n" in outcome.err, (
        outcome.err
    )


HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another process holds the file's write lock (BEGIN IMMEDIATE) for the length of the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n", (
            holder.communicate()[1]
        )
        yield
    finally:
        holder.communicate(timeout=30)  # closes its stdin: it commits nothing and exits


@pytest.mark.sqlite_only("the write lock of the SQLite file")
def test_a_locked_state_database(yard: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli(yard, "run", "hello").code == 0  # the database exists
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    database = yard.resolve() / ".blockyard" / "state.db"
    with write_locked(database):
        outcome = cli(yard, "run", "hello")
    assert (outcome.code, outcome.err) == (1, quoted("locked", db=str(database), wait="0.2") + "\n")


def decided_at(message: str) -> str:
    """When the gate was decided, as a refusal of a second decision says it."""
    found = re.search(r"approved by grace at (\S+);", message)
    assert found, message
    return found.group(1)


def test_a_gate_that_will_not_decide(yard: Path, cli: Cli) -> None:
    assert cli(yard, "run", "refund", "--run-id", "r1").code == 3
    for args, name in (
        (["resume", "r1"], "gate needs a decision"),
        (["resume", "r1", "--approve"], "gate needs --as"),
        (["resume", "r1", "--approve", "--as", "bob"], "gate approver"),
        (["resume", "r1", "--approve", "--as", "grace", "--set", "amount=five"], "gate field type"),
        (["resume", "r1", "--approve", "--as", "grace", "--set", "amont=5"], "gate field name"),
    ):
        outcome = cli(yard, *args)
        assert (outcome.code, outcome.err) == (2, quoted(name, run="r1") + "\n"), args
    assert cli(yard, "resume", "r1", "--approve", "--as", "grace", "--set", "amount=5").code == 0
    decided = json.loads(cli(yard, "runs", "show", "r1", "--json").out)["decisions"][0]["decided"]
    outcome = cli(yard, "resume", "r1", "--approve", "--as", "grace", "--set", "amount=5")
    assert (outcome.code, outcome.err) == (2, quoted("gate decided", run="r1", time=decided) + "\n")


@pytest.fixture
def live(yard: Path) -> Iterator[Live]:
    server = start_live(Settings(root=yard, grace=5.0, poll=0.1, schedules=False))
    yield server
    server.stop()


def test_421_413_and_409_from_the_server(live: Live) -> None:
    with live.client() as client:
        answer = client.get("/flows", headers={"Host": "evil.example"})
        assert (answer.status_code, answer.text) == (421, quoted("421"))
        answer = client.post("/flows/hello/runs", json={"inputs": {"name": "a" * 3000}})
        assert (answer.status_code, answer.text) == (413, quoted("413 body", body_limit="2000"))
        inputs = {"name": "a" * 800}
        size = str(len(json.dumps(inputs, separators=(",", ":")).encode()))
        answer = client.post("/flows/hello/runs", json={"inputs": inputs})
        assert (answer.status_code, answer.text) == (
            413,
            quoted("413 inputs", size=size, input_limit="500"),
        )
        assert client.post("/flows/hello/runs", json={"run_id": "h1"}).status_code == 200
        answer = client.post("/flows/hello/runs", json={"run_id": "h1"})
        assert (answer.status_code, answer.text) == (409, quoted("409 run_exists", run="h1"))
        answer = client.post("/runs/h1/resume", json={"decision": "approve"})
        assert (answer.status_code, answer.text) == (409, quoted("409 not_waiting", run="h1"))
        answer = client.post("/runs/h1/resume", json={})
        assert (answer.status_code, answer.text) == (409, quoted("409 not_resumable", run="h1"))
        waiting = client.post("/flows/refund/runs", json={"run_id": "r2"}).json()
        assert waiting["status"] == "waiting", waiting
        decision = {"decision": "approve", "actor": "grace", "values": {"amount": 1}}
        assert client.post("/runs/r2/resume", json=decision).json()["status"] == "finished"
        answer = client.post("/runs/r2/resume", json=decision)
        assert (answer.status_code, answer.text) == (
            409,
            quoted("409 already_decided", run="r2", time=decided_at(answer.text)),
        )
