"""Values the engine cannot hold (integers beyond 64 bits, lone surrogates) and absurd durations,
end to end: refused up front with exit 2, or a failed run that names the step and can be shown
and resumed — never exit 4, never a run stuck behind an unserialisable checkpoint."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.models import TurnRequest, scripted
from engine.runtime.yard import Yard
from engine.spec import parse_duration
from engine.spec.common import MAX_DURATION
from engine.spec.decisions import DecisionRefused
from engine.state import gates
from tests.runtime.conftest import Outcome, run_engine, subprocess_env
from tests.support import processes

FILES = {
    "blockyard.yaml": """
        models:
          default: {provider: mock}
        paths: {code: tools}
        tools:
          big_number: {import: numbers_tool:big_number}
    """,
    "tools/numbers_tool.py": '''
        def big_number() -> int:
            """A number too big for the engine."""
            return 10 ** 30
    ''',
    "blocks/power.yaml": """
        block: power
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {m: {type: any}}
        compute: {m: "10 ** n"}
    """,
    "blocks/count.yaml": """
        block: count
        kind: llm
        inputs: {n: {type: integer}}
        outputs: {m: {type: integer}}
        prompt: {user: "Count to {{ n }}."}
    """,
    "blocks/helper.yaml": """
        block: helper
        kind: agent
        outputs: {answer: {type: any}}
        prompt: {user: Help.}
        tools: [current_time, big_number]
        max_iterations: 3
    """,
    "flows/power.yaml": """
        flow: power
        inputs: {n: {type: integer, default: 30}}
        outputs: [m]
        steps:
          - id: raise
            uses: power
    """,
    "flows/count.yaml": """
        flow: count
        inputs: {n: {type: integer, default: 1}}
        outputs: [m]
        steps:
          - id: count
            uses: count
    """,
    "flows/help.yaml": """
        flow: help
        outputs: [answer]
        steps:
          - id: helper
            uses: helper
    """,
    "blocks/num.yaml": """
        block: num
        kind: transform
        inputs: {n: {type: integer}}
        outputs: {m: {type: integer}}
        compute: {m: "n"}
    """,
    "blocks/say.yaml": """
        block: say
        kind: llm
        outputs: {s: {type: string}}
        prompt: {user: '{{ "caf\\udcc3" }}'}
    """,
    "blocks/helper_says.yaml": """
        block: helper_says
        kind: agent
        outputs: {s: {type: string}}
        prompt: {user: '{{ "caf\\udcc3" }}'}
    """,
    "flows/each.yaml": """
        flow: each
        steps:
          - id: each
            foreach: {items: "[1, 10 ** 30]", as: n, steps: [{id: inner, uses: num}]}
    """,
    "flows/fan.yaml": """
        flow: fan
        steps:
          - id: fan
            map: {items: "[1, 10 ** 30]", as: n, uses: num}
    """,
    "flows/gate_text.yaml": """
        flow: gate_text
        steps:
          - id: ask
            approval: {message: '{{ "caf\\udcc3" }}'}
    """,
    "flows/say.yaml": """
        flow: say
        steps:
          - {id: say, uses: say}
    """,
    "flows/helper_says.yaml": """
        flow: helper_says
        steps:
          - {id: helper, uses: helper_says}
    """,
    "blocks/remember.yaml": """
        block: remember
        kind: memory_write
        memory: {namespace: preferences, key: '{{ "k\\udcc3" }}'}
        inputs: {memory_value: {type: any}}
    """,
    "flows/remember.yaml": """
        flow: remember
        memory: {scope: users/ada}
        steps:
          - {id: save, uses: remember, with: {memory_value: 1}}
    """,
    "flows/ask.yaml": """
        flow: ask
        inputs: {topic: {type: string, default: lunch}}
        outputs: [note]
        steps:
          - id: ask
            approval:
              message: Anything to add?
              fields: {note: {type: any, default: none}}
    """,
}


@pytest.fixture
def root(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard(FILES)


@pytest.fixture
def yard(root: Path) -> Iterator[Yard]:
    opened = Yard.load(root)
    yield opened
    opened.close()


def no_crash(outcome: Outcome) -> None:
    assert "internal error" not in outcome.err and "Traceback" not in outcome.err, outcome.err


# ---- refused up front ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pair", ["n=100000000000000000000000", "n=-9223372036854775809", "n=0x10000000000000000"]
)
def test_a_huge_input_is_a_usage_error_and_no_run(
    cli: Callable[..., Outcome], root: Path, pair: str
) -> None:
    outcome = cli(root, "run", "power", "--input", pair)
    assert outcome.code == 2, outcome.err
    assert "--input 'n'" in outcome.err and "64-bit range" in outcome.err
    assert cli(root, "runs").out.count("power") == 0


def test_a_huge_value_in_an_inputs_file_is_a_usage_error(
    cli: Callable[..., Outcome], root: Path, tmp_path: Path
) -> None:
    path = tmp_path / "inputs.json"
    path.write_text('{"n": 100000000000000000000000}', encoding="utf-8")
    outcome = cli(root, "run", "power", "--inputs-file", str(path))
    assert outcome.code == 2 and "64-bit range" in outcome.err, outcome.err


NOT_UTF8 = [
    ([b"run", b"power", b"--input", b"n=\xff"], "--input"),
    ([b"resume", b"some-run", b"--reject", b"--reason=caf\xe9"], "--reason"),
    ([b"run", b"po\xffwer"], "argument 2"),
]


@pytest.mark.parametrize(("args", "option"), NOT_UTF8)
def test_command_line_arguments_that_are_not_utf8_are_a_usage_error(
    root: Path, args: list[bytes], option: str, cli: Callable[..., Outcome]
) -> None:
    # what Python makes of argv bytes that are not UTF-8 (surrogateescape), as in the real process below
    outcome = cli(root, *[os.fsdecode(arg) for arg in args])
    assert outcome.code == 2, outcome.err
    assert outcome.err.startswith(f"error: {option}: not valid text") and "surrogate" in outcome.err


def test_the_same_from_a_real_command_line(root: Path) -> None:
    """The interpreter's own decoding of argv bytes, through the process boundary (one case)."""
    args, option = NOT_UTF8[0]
    done = processes.run(
        [sys.executable.encode(), b"-m", b"engine", *args, b"--root", str(root).encode()],
        cwd=root,
        env=subprocess_env(),
        capture_output=True,
        timeout=60,
    )
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2, err
    assert err.startswith(f"error: {option}: not valid text") and "surrogate" in err


def test_python_api_refuses_huge_inputs_and_surrogates(yard: Yard) -> None:
    from engine.core.errors import UsageError

    with pytest.raises(UsageError, match="input 'n' is an integer outside the 64-bit range"):
        yard.run("power", {"n": 2**64})
    with pytest.raises(UsageError, match="input 'topic' holds a lone surrogate"):
        yard.run("ask", {"topic": "caf\udcc3"})
    with pytest.raises(UsageError, match=r"input name .* is not valid text"):
        yard.run("ask", {"\udcff": 1})
    assert yard.runs() == []


def test_approval_values_and_reasons_outside_the_domain_are_refused(
    yard: Yard, cli: Callable[..., Outcome], root: Path
) -> None:
    waiting = yard.run("ask", {}, run_id="gate-1")
    assert waiting.status == "waiting"
    with pytest.raises(DecisionRefused, match="reason"):
        yard.resume("gate-1", approve=False, reason="bad \udcff")
    with pytest.raises(DecisionRefused, match="64-bit"):
        yard.resume("gate-1", approve=True, values={"note": [1, 2**70]})
    yard.close()
    outcome = cli(root, "resume", "gate-1", "--approve", "--set", "note=100000000000000000000000")
    assert outcome.code == 2 and "--set 'note'" in outcome.err, outcome.err
    done = cli(root, "resume", "gate-1", "--approve", "--set", "note=9223372036854775807")
    assert done.code == 0, done.err


# ---- failed runs that name the step, and can be shown and resumed -----------------------------


def test_a_template_result_beyond_64_bits_fails_the_step_and_the_run_can_be_shown_and_resumed(
    cli: Callable[..., Outcome], root: Path
) -> None:
    outcome = cli(root, "run", "power", "--run-id", "big-1")
    no_crash(outcome)
    assert outcome.code == 1
    # the template's own bound (engine/templates/limits.py) refuses it before the value reaches the state
    assert "step 'raise'" in outcome.err and "exceeds the 64-bit limit" in outcome.err
    shown = cli(root, "runs", "show", "big-1")
    no_crash(shown)
    assert shown.code == 0 and "failed" in shown.out and "exceeds the 64-bit limit" in shown.out
    as_json = cli(root, "runs", "show", "big-1", "--json")
    assert as_json.code == 0, as_json.err
    resumed = cli(root, "resume", "big-1")
    no_crash(resumed)
    assert resumed.code == 1 and "step 'raise'" in resumed.err


def test_the_same_in_a_real_process(root: Path) -> None:
    outcome = run_engine(root, "run", "power", "--run-id", "big-2", "--input", "n=19")
    assert outcome.code == 1 and "step 'raise'" in outcome.err and "64-bit" in outcome.err, (
        outcome.err
    )
    assert run_engine(root, "resume", "big-2").code == 1
    shown = run_engine(root, "runs", "show", "big-2")
    assert shown.code == 0 and "64-bit" in shown.out, shown.err


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"m": 10**30}, "'reply.m' is an integer outside the 64-bit range"),
        ({"m": 10**5000}, "'reply.m' is an integer outside the 64-bit range"),  # not even printable
        ('{"m": 1, "note": "caf\udcc3"}', "'reply.note' holds a lone surrogate"),
    ],
)
def test_a_model_reply_outside_the_domain_fails_the_step_and_resume_recovers(
    yard: Yard, reply: object, message: str
) -> None:
    """The model is asked to repair its reply once (as for any reply that does not fit), then the
    step fails naming the step; the run can be resumed, here with a model that answers well."""
    with scripted("model-1", {"count": [reply]}) as script:
        failed = yard.run("count", {}, run_id="model-1")
    assert failed.status == "failed" and failed.step == "count"
    assert message in (failed.error or "")
    assert len(script.calls) == 1  # one request, answered twice (the repair turn)
    with scripted("model-1", {"count": [{"m": 7}]}):
        done = yard.resume("model-1")
    assert done.status == "finished" and done.outputs == {"m": 7}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            {"$tool_calls": [{"name": "current_time", "args": {"timezone": 10**30}}]},
            "the model's reply 'current_time.args.timezone' is an integer outside the 64-bit range",
        ),
        ({"$text": "caf\udcc3"}, "the model's reply 'text' holds a lone surrogate"),
        (
            {"answer": {"n": -(2**64)}},
            "'final_answer.args.answer.n' is an integer outside the 64-bit range",
        ),
        ({"$tool_calls": 5}, "malformed scripted reply at $tool_calls: $tool_calls must be a list"),
    ],
)
def test_agent_replies_outside_the_domain_fail_the_step(
    yard: Yard, cli: Callable[..., Outcome], root: Path, reply: object, message: str
) -> None:
    with scripted("agent-1", {"helper": [reply]}):
        failed = yard.run("help", {}, run_id="agent-1")
    assert failed.status == "failed", failed
    assert message in (failed.error or "")
    yard.close()
    shown = cli(root, "runs", "show", "agent-1")
    assert shown.code == 0, shown.err


def test_a_tool_result_beyond_64_bits_is_an_error_the_agent_sees(yard: Yard) -> None:
    replies = [
        {"$tool_calls": [{"name": "big_number", "args": {}, "id": "c1"}]},
        {"answer": "gave up"},
    ]
    with scripted("tool-1", {"helper": replies}) as script:
        done = yard.run("help", {}, run_id="tool-1")
    assert done.status == "finished", done.error
    last = script.calls[-1]
    assert isinstance(last, TurnRequest)  # the agent's second turn
    seen = [message for message in last.messages if getattr(message, "tool_call_id", None) == "c1"]
    assert (
        len(seen) == 1
        and "error: tool 'big_number' returned a value the engine cannot hold" in seen[0].content
    )
    events = [
        e
        for e in yard.events("tool-1")
        if e.type == "tool_call" and e.data.get("tool") == "big_number"
    ]
    assert events[-1].data["status"] == "error"


@pytest.mark.parametrize(
    ("flow", "step", "message"),
    [
        ("each", "each", "items: power exceeds the 64-bit limit"),
        ("fan", "fan", "items: power exceeds the 64-bit limit"),
        (
            "gate_text",
            "ask",
            "approval message: the rendered text holds a lone surrogate character U+DCC3",
        ),
        ("say", "say", "prompt.user: the rendered text holds a lone surrogate character U+DCC3"),
        (
            "helper_says",
            "helper",
            "prompt.user: the rendered text holds a lone surrogate character U+DCC3",
        ),
        (
            "remember",
            "save",
            "memory.key: the rendered key holds a lone surrogate character U+DCC3",
        ),
    ],
)
def test_template_results_outside_the_domain_fail_the_step(
    cli: Callable[..., Outcome], root: Path, flow: str, step: str, message: str
) -> None:
    """foreach/map items (kept in the state), an approval message (written to the gates table)
    and prompts (sent to a provider): a template can make a lone surrogate with a "\\udcc3" escape."""
    outcome = cli(root, "run", flow, "--run-id", "t-1")
    no_crash(outcome)
    assert outcome.code == 1 and f"step '{step}'" in outcome.err and message in outcome.err, (
        outcome.err
    )
    shown = cli(root, "runs", "show", "t-1")
    assert shown.code == 0 and message in shown.out, shown.err


# ---- durations -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["3000000d", "87600000h", "9" * 400 + "ms"])
def test_absurd_durations_are_held_to_the_maximum_at_run_time(text: str) -> None:
    assert parse_duration(text) == MAX_DURATION


def test_a_gate_deadline_from_a_pinned_absurd_timeout_does_not_overflow() -> None:
    """A run pinned before validate refused such timeouts: recording its gate must not crash."""
    now = gates.iso(datetime.now(UTC))
    due = gates._timeout_at({"timeout": "3000000d"}, now)
    assert due is not None and due > now
    assert gates._timeout_at({"timeout": "1d"}, "9999-12-31T00:00:00.000Z") is None


def test_a_gate_with_an_absurd_timeout_from_before_the_rule_waits_and_resumes(
    make_yard: Callable[[dict[str, str]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`timeout: 3000000d` once left the run `interrupted` (OverflowError) and resume crashed the
    same way. validate refuses it now (BY515); a definition that got through before still runs."""
    import engine.validate.semantic as semantic

    monkeypatch.setattr(semantic, "check_durations", lambda project: [], raising=False)
    root = make_yard(
        {
            "blockyard.yaml": "models:\n  default: {provider: mock}\n",
            "flows/slow_gate.yaml": """
        flow: slow_gate
        outputs: [note]
        steps:
          - id: ask
            approval:
              message: Go on?
              fields: {note: {type: string, default: fine}}
              timeout: 3000000d
              on_timeout: approve
    """,
        }
    )
    yard = Yard.load(root)
    try:
        waiting = yard.run("slow_gate", {}, run_id="slow-1")
        assert waiting.status == "waiting", waiting.error
        (gate,) = yard.gates("slow-1")
        assert gate.timeout_at is not None and gate.timeout_at > gate.created
        done = yard.resume("slow-1", approve=True)
        assert (done.status, done.outputs) == ("finished", {"note": "fine"})
    finally:
        yard.close()
