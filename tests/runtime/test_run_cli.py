"""`blockyard run` end to end: outputs, events, input coercion, and the failures users meet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.runtime.conftest import Outcome

Cli = Callable[..., Outcome]


def test_hello_prints_json_events(yard: Path, cli: Cli) -> None:
    done = cli(yard, "run", "hello", "--input", "name=Ada", "--json")
    assert done.code == 0, done.err
    events = done.events()
    # the mock streams the llm reply word by word, as a real model's (docs/models.md, "Token streaming")
    assert [(e["type"], e["step"]) for e in events] == [
        ("run_started", None),
        ("step_started", "greet"),
        ("token", "greet"),
        ("token", "greet"),
        ("model_call", "greet"),
        ("step_finished", "greet"),
        ("step_started", "shout"),
        ("step_finished", "shout"),
        ("run_finished", None),
    ]
    assert "".join(e["data"]["text"] for e in events if e["type"] == "token") == "greet: name=Ada"
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    # the mock's usage is deterministic (about four characters a token), its price nothing
    call = next(e["data"] for e in events if e["type"] == "model_call")
    timings = {key: call.pop(key) for key in ("latency_ms", "ttft_ms")}
    assert call == {
        "block": "greet",
        "purpose": "block",
        "provider": "mock",
        "model": "mock",
        "profile": "default",
        "input_tokens": 3,
        "output_tokens": 8,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
        "cost_usd": 0.0,
        "price_source": "mock",
        "ok": True,
    }
    # streamed: its first token came before its end
    assert 0 <= timings["ttft_ms"] <= timings["latency_ms"]
    assert {e["run_id"] for e in events} == {events[0]["run_id"]}
    assert all(set(e) == {"type", "run_id", "seq", "step", "time", "data"} for e in events)
    assert events[-1]["data"]["outputs"] == {
        "greeting": "greet: name=Ada",
        "loud": "GREET: NAME=ADA",
        "words": 2,
    }
    assert done.err.count("note: no model configured: using the offline mock model") == 1


def test_hello_in_process_prints_outputs_as_yaml(yard: Path, cli: Cli) -> None:
    done = cli(yard, "run", "hello", "--input", "name=Ada")
    assert done.code == 0, done.err
    assert done.out == "greeting: 'greet: name=Ada'\nloud: 'GREET: NAME=ADA'\nwords: 2\n"
    assert "  greet: finished in" in done.err and "  shout: started" in done.err
    assert done.err.rstrip().splitlines()[-1].startswith("run ")
    assert " finished in " in done.err.rstrip().splitlines()[-1]


@pytest.mark.parametrize(
    ("flow", "args", "outputs"),
    [
        ("calc", ["n=0"], {"n": 1, "label": "small"}),  # 0 is the integer 0, not the string "0"
        ("calc", ["n=10"], {"n": 11, "label": "big"}),
        ("calc", ["n=-3"], {"n": -2, "label": "small"}),
        ("echo", ["zip=0"], {"same": "0", "length": 1}),  # declared string: "0" stays text
        ("echo", ["zip=007"], {"same": "007", "length": 3}),
        ("echo", ["zip=yes"], {"same": "yes", "length": 3}),
    ],
)
def test_transform_flows_give_exact_outputs(
    yard: Path, cli: Cli, flow: str, args: list[str], outputs: dict[str, object]
) -> None:
    done = cli(yard, "run", flow, *[part for arg in args for part in ("--input", arg)], "--json")
    assert done.code == 0, done.err
    assert done.events()[-1]["data"]["outputs"] == outputs


def test_inputs_file(yard: Path, cli: Cli, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.json"
    inputs.write_text('{"n": 41}')
    done = cli(yard, "run", "calc", "--inputs-file", str(inputs), "--json")
    assert done.events()[-1]["data"]["outputs"] == {"n": 42, "label": "big"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "helo"], "error: unknown flow 'helo' (did you mean 'hello'?)"),
        (
            ["run", "calc", "--input", "n=many"],
            "error: flow 'calc': input 'n' must be an integer, got string 'many'",
        ),
        (["run", "calc", "--input", "n=1.5"], "input 'n' must be an integer, got number 1.5"),
        (["run", "calc", "--input", "m=1"], "unknown input 'm'"),
        (["run", "calc"], "missing input 'n' (integer)"),
        (["run", "hello", "--input", "nme=Ada"], "unknown input 'nme' (did you mean 'name'?)"),
        (["run", "hello", "--input", "Ada"], "--input 'Ada': expected KEY=VALUE"),
        (["run", "hello", "--run-id", "no spaces"], "invalid run id 'no spaces'"),
        (["resume", "nope"], "unknown run 'nope'"),
        (["runs", "--status", "faild"], "unknown status 'faild' (did you mean 'failed'?)"),
        (["resume", "x", "--approve"], "unknown run 'x'"),
        (
            ["resume", "x", "--reason", "because"],
            "--reason needs a decision: --approve or --reject",
        ),
        (["run", "hello", "--thread", "no spaces"], "invalid thread id 'no spaces'"),
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(
    yard: Path, cli: Cli, args: list[str], message: str
) -> None:
    done = cli(yard, *args)
    assert done.code == 2
    assert message in done.err
    assert "Traceback" not in done.err and len(done.err.strip().splitlines()) == 1


def test_a_run_id_can_be_chosen_once(yard: Path, cli: Cli) -> None:
    assert cli(yard, "run", "calc", "--input", "n=1", "--run-id", "my-run.1").code == 0
    again = cli(yard, "run", "calc", "--input", "n=1", "--run-id", "my-run.1")
    assert again.code == 2
    assert "run id 'my-run.1' is already taken" in again.err


def test_invalid_flow_is_reported_with_positions(yard: Path, cli: Cli) -> None:
    (yard / "flows" / "broken.yaml").write_text(
        "flow: broken\nsteps:\n  - id: a\n    uses: nothing\n"
    )
    done = cli(yard, "run", "broken")
    assert done.code == 1
    assert done.err.startswith("flows/broken.yaml:4:")
    assert cli(yard, "run", "hello").code == 0  # another flow's broken file does not stop this one


def test_block_timeout_fails_the_run_clearly(yard: Path, cli: Cli) -> None:
    done = cli(yard, "run", "timeouty", "--json")
    assert done.code == 1
    last = done.events()[-1]
    assert (last["type"], last["step"], last["data"]["status"]) == (
        "run_failed",
        "sleepy",
        "failed",
    )
    assert last["data"]["error"] == "timed out after 200ms"
    assert (
        "error: run " in done.err
        and "failed at step 'sleepy' (block 'stuck'): timed out after 200ms" in done.err
    )


def test_garbage_model_output_fails_the_run(yard: Path, cli: Cli) -> None:
    done = cli(yard, "run", "garbage", "--json")
    assert done.code == 1
    last = done.events()[-1]
    assert (last["type"], last["step"]) == ("run_failed", "parse")
    assert "amount" in last["data"]["error"]
    listed = cli(yard, "runs", "--status", "failed")
    assert "garbage@1" in listed.out and "step 'parse'" in listed.out


def test_graph_command(yard: Path, cli: Cli) -> None:
    mermaid = cli(yard, "graph", "hello")
    assert mermaid.code == 0
    assert mermaid.out.startswith("flowchart") and "greet --> shout" in mermaid.out
    dot = cli(yard, "graph", "hello", "--format", "dot")
    assert dot.code == 0 and dot.out.startswith('digraph "hello"')
    assert cli(yard, "graph", "nope").code == 2


def test_step_limit_fails_the_run_clearly(yard: Path, cli: Cli) -> None:
    (yard / "flows" / "short.yaml").write_text(
        "flow: short\nmax_steps: 1\ninputs: {n: {type: integer}}\noutputs: [n]\nsteps:\n"
        "  - {id: a, uses: inc, with: {n: '{{ inputs.n }}'}}\n  - {id: b, uses: inc}\n  - {id: c, uses: inc}\n"
    )
    done = cli(yard, "run", "short", "--input", "n=1", "--json")
    assert done.code == 1
    last = done.events()[-1]
    assert last["type"] == "run_failed"
    assert last["step"] is None and "went over its limit of 1 steps" in last["data"]["error"]
    assert "Traceback" not in done.err


def test_an_approval_gate_pauses_the_run(yard: Path, cli: Cli) -> None:
    done = cli(yard, "run", "gated", "--json")
    assert done.code == 3
    last = done.events()[-1]
    assert (last["type"], last["step"]) == ("approval_required", "ok")
    assert last["data"]["value"]["message"] == "Proceed with 2?"
    assert "is waiting for approval at gate 'ok': Proceed with 2?" in done.err
    run_id = last["run_id"]
    row = next(line for line in cli(yard, "runs").out.splitlines() if line.startswith(run_id))
    assert "waiting" in row and row.endswith("gate 'ok'")
    assert "waiting   gate 'ok': Proceed with 2?" in cli(yard, "runs", "show", run_id).out
    refused = cli(yard, "resume", run_id)
    assert (
        refused.code == 2
        and f"is waiting for an approval: decide it with `blockyard resume {run_id} --approve`"
        in refused.err
    )
