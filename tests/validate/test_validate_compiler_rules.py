"""Every rule the compiler and the executors used to check on their own is the validator's: the
definition that once failed to compile is refused by `validate`, with a code, at the file, line and
column of the mistake (docs/architecture.md, "Where a rule lives"). The compiler trusts what
validates (tests/compile/test_compile_trusts_the_validator.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.definitions.project import load_project
from engine.validate.semantic import check_project

MakeYard = Callable[[dict[str, str]], Path]

BLOCKS = {
    "inc": "block: inc\nkind: transform\ninputs: {n: {type: integer, default: 0}}\noutputs: {n: {type: integer}}\n"
    "compute: {n: n + 1}\n",
    "pick": "block: pick\nkind: decide\noutputs: {c: {type: string, enum: [a, b]}}\nprompt: {user: Which?}\n",
    "helper": "block: helper\nkind: agent\ninputs: {task: {type: string, default: ''}}\n"
    "outputs: {answer: {type: string}}\nprompt: {user: '{{ task }}'}\n",
}
CHILD = "flow: child\ninputs: {a: {type: integer, default: 0}}\noutputs: [n]\nsteps:\n  - {id: c, uses: inc}\n"


Found = tuple[str, int, int, str]  # file, line, column, code
Expected = tuple[str, int, str, str]  # file, line, the token the diagnostic points at, code


def problems(
    make_yard: MakeYard,
    flow: str,
    blocks: dict[str, str] | None = None,
    flows: dict[str, str] | None = None,
    config: str | None = None,
) -> tuple[list[Found], Path]:
    """(file, line, column, code) of every error validate reports (loading, schema and semantic)."""
    files = {f"blocks/{name}.yaml": text for name, text in {**BLOCKS, **(blocks or {})}.items()}
    files["flows/f.yaml"] = flow
    files["flows/child.yaml"] = CHILD
    files.update({f"flows/{name}.yaml": text for name, text in (flows or {}).items()})
    if config is not None:
        files["blockyard.yaml"] = config
    root = make_yard(files)
    project = load_project(root)
    found = [*project.diagnostics, *check_project(project)]
    return [(d.file, d.line, d.col, d.code) for d in found if d.severity == "error"], root


def at(root: Path, expected: Expected) -> Found:
    """Where the token starts on its line: the place the diagnostic about it must point at."""
    file, line, token, code = expected
    text = (root / file).read_text(encoding="utf-8").splitlines()[line - 1]
    assert text.count(token) == 1, f"'{token}' is not unique on line {line}: {text}"
    return file, line, text.index(token) + 1, code


def one_step(step: str) -> str:
    return f"flow: f\nsteps:\n  - {step}\n"


def agent(name: str, extra: str = "") -> str:
    return BLOCKS["helper"].replace("block: helper", f"block: {name}") + extra


F = "flows/f.yaml"
B = "blocks/b.yaml"

# (the compiler's check it replaces, the flow, extra blocks, what validate reports)
FLOW_RULES: list[tuple[str, str, dict[str, str], list[Expected]]] = [
    (
        "compile/flow.py: step id used twice",
        one_step("{id: s, loop: {max_iterations: 2, steps: [{id: s, uses: inc}]}}"),
        {},
        [(F, 3, "s, uses", "BY302")],
    ),
    (
        "compile/flow.py: reserved step id",
        one_step("{id: __s, uses: inc}"),
        {},
        [(F, 3, "__s", "BY303")],
    ),
    ("compile/constructs.py: no action", one_step("{id: s}"), {}, [(F, 3, "s}", "BY300")]),
    (
        "compile/constructs.py: two actions",
        one_step("{id: s, uses: inc, flow: child}"),
        {},
        [(F, 3, "flow", "BY301")],
    ),
    (
        "compile/constructs.py: with on a loop",
        one_step("{id: s, loop: {max_iterations: 1, steps: [{id: t, uses: inc}]}, with: {n: 1}}"),
        {},
        [(F, 3, "with", "BY317")],
    ),
    (
        "compile/constructs.py: outputs on a map",
        one_step("{id: s, map: {items: '[1]', uses: inc, collect: c}, outputs: {c: d}}"),
        {},
        [(F, 3, "outputs", "BY317")],
    ),
    (
        "compile/constructs.py: branches without uses",
        one_step("{id: s, router: {routes: [], default: end}, branches: {a: end}}"),
        {},
        [(F, 3, "branches", "BY310")],
    ),
    (
        "compile/constructs.py: an approval step behind require_approval",
        one_step("{id: s, approval: {message: ok?}, require_approval: true}"),
        {},
        [(F, 3, "require_approval", "BY317")],
    ),
    (
        "compile/uses.py: branches after a block that does not decide",
        one_step("{id: s, uses: inc, branches: {a: end}}"),
        {},
        [(F, 3, "branches", "BY310")],
    ),
    (
        "compile/router.py: text rule without value",
        one_step("{id: s, router: {routes: [{contains: x, goto: end}], default: end}}"),
        {},
        [(F, 3, "{contains", "BY315")],
    ),
    (
        "compile/router.py: rule without condition",
        one_step("{id: s, router: {value: x, routes: [{goto: end}], default: end}}"),
        {},
        [(F, 3, "{goto", "BY314")],
    ),
    (
        "compile/router.py: regex RE2 rejects",
        one_step(
            "{id: s, router: {value: x, routes: [{regex: '(a)\\1', goto: end}], default: end}}"
        ),
        {},
        [(F, 3, "'(a)", "BY313")],
    ),
    (
        "compile/subflow.py: subflow not in the bundle",
        one_step("{id: s, flow: nowhere}"),
        {},
        [(F, 3, "nowhere", "BY214")],
    ),
    (
        "compile/subflow.py: with binds no input of the subflow",
        one_step("{id: s, flow: child, with: {b: 1}}"),
        {},
        [(F, 3, "b: 1", "BY215")],
    ),
    (
        "compile/subflow.py: outputs renames no output of the subflow",
        one_step("{id: s, flow: child, outputs: {x: y}}"),
        {},
        [(F, 3, "x: y", "BY216")],
    ),
    (
        "compile/mapping.py: map with uses and steps",
        one_step("{id: s, map: {items: '[1]', uses: inc, steps: [{id: t, uses: inc}]}}"),
        {},
        [(F, 3, "steps", "BY319")],
    ),
    (
        "compile/topology.py: goto an unknown step",
        one_step("{id: s, uses: inc, goto: nowhere}"),
        {},
        [(F, 3, "nowhere", "BY212")],
    ),
    (
        "compile/topology.py: goto out of a loop body",
        one_step("{id: s, loop: {max_iterations: 2, steps: [{id: t, uses: inc, goto: s}]}}"),
        {},
        [(F, 3, "s}]", "BY213")],
    ),
    (
        "compile/topology.py: needs an unknown step",
        one_step("{id: s, uses: inc, needs: [nowhere]}"),
        {},
        [(F, 3, "needs", "BY309"), (F, 3, "nowhere", "BY212")],
    ),
    (
        "compile/approval.py: on_reject to an unknown step",
        one_step("{id: gate, approval: {message: ok?, on_reject: nowhere}}"),
        {},
        [(F, 3, "nowhere", "BY212")],
    ),
    (
        "compile/approval.py: on_timeout to an unknown step",
        one_step("{id: gate, uses: inc, require_approval: {timeout: 1h, on_timeout: nowhere}}"),
        {},
        [(F, 3, "nowhere", "BY212")],
    ),
    (
        "compile/approval.py: approve on timeout without defaults",
        one_step(
            "{id: s, approval: {fields: {x: {type: string}}, timeout: 1h, on_timeout: approve}}"
        ),
        {},
        [(F, 3, "approve", "BY445")],
    ),
    (
        "compile/builder.py: block not in the bundle",
        one_step("{id: s, uses: nothing}"),
        {},
        [(F, 3, "nothing", "BY210")],
    ),
    (
        "compile/blockstep.py: with binds no input of the block",
        one_step("{id: s, uses: inc, with: {m: 1}}"),
        {},
        [(F, 3, "m: 1", "BY215")],
    ),
    (
        "compile/blockstep.py: outputs renames no output of the block",
        one_step("{id: s, uses: inc, outputs: {x: y}}"),
        {},
        [(F, 3, "x: y", "BY216")],
    ),
    (
        "compile/delegates.py: every step a delegate",
        "flow: f\nsteps:\n  - {id: a, uses: helper, delegates: [b]}\n  - {id: b, uses: helper, delegates: [a]}\n",
        {},
        [(F, 3, "b]", "BY320"), (F, 4, "a]", "BY320")],
    ),
    (
        "compile/agent.py: delegate that is no agent step or flow",
        one_step("{id: s, uses: helper, delegates: [nobody]}"),
        {},
        [(F, 3, "nobody", "BY218")],
    ),
    (
        "compile/agent.py: delegate out of the step's list",
        "flow: f\nsteps:\n  - {id: s, uses: helper, delegates: [t]}\n"
        "  - {id: l, loop: {max_iterations: 1, steps: [{id: t, uses: helper}]}}\n",
        {},
        [(F, 3, "t]", "BY213")],
    ),
    (
        "compile/agent.py: delegation cycle through blocks",
        one_step("{id: s, uses: ping}"),
        {
            "ping": agent("ping", "delegates: [pong]\n"),
            "pong": agent("pong", "delegates: [ping]\n"),
        },
        [("blocks/ping.yaml", 6, "pong", "BY320"), ("blocks/pong.yaml", 6, "ping", "BY320")],
    ),
    (
        "compile/agent.py: block delegate that is no agent block or flow",
        one_step("{id: s, uses: lead}"),
        {"lead": agent("lead", "delegates: [nobody]\n")},
        [("blocks/lead.yaml", 6, "nobody", "BY218")],
    ),
    (
        "agents/executor.py: a name offered as a tool and as a delegate",
        one_step(
            "{id: s, uses: lead, delegates: [current_time]}\n  - {id: current_time, uses: helper}"
        ),
        {"lead": agent("lead", "tools: [current_time]\n")},
        [(F, 3, "current_time", "BY441")],
    ),
]

# (the executor's check it replaces, the block after its `block: b` line, what validate reports)
BLOCK_RULES: list[tuple[str, str, list[Expected]]] = [
    (
        "executors/__init__.py: a kind without an executor",
        "kind: magic\n",
        [(B, 2, "magic", "BY105")],
    ),
    ("executors/wait.py: no duration", "kind: wait\n", [(B, 2, "wait", "BY352")]),
    ("executors/tool.py: no tool", "kind: tool\n", [(B, 2, "tool", "BY351")]),
    (
        "executors/transform.py: compute of no output",
        "kind: transform\noutputs: {a: {type: string}}\ncompute: {a: '1', z: '2'}\n",
        [(B, 4, "z:", "BY350")],
    ),
    (
        "executors/transform.py: output without compute",
        "kind: transform\noutputs: {a: {type: string}, b: {type: string}}\ncompute: {a: \"'x'\"}\n",
        [(B, 4, "compute", "BY350")],
    ),
    (
        "executors/model.py: llm without outputs",
        "kind: llm\nprompt: {user: hi}\n",
        [(B, 2, "llm", "BY358")],
    ),
    (
        "executors/model.py: decide with two outputs",
        "kind: decide\nprompt: {user: hi}\noutputs: {a: {type: string, enum: [x]}, b: {type: string}}\n",
        [(B, 4, "outputs", "BY353")],
    ),
    (
        "executors/model.py: decide output without enum",
        "kind: decide\nprompt: {user: hi}\noutputs: {c: {type: string}}\n",
        [(B, 4, "outputs", "BY353")],
    ),
    ("executors/smart.py: smart without outputs", "kind: smart\n", [(B, 2, "smart", "BY358")]),
    (
        "executors/smart.py: an input DSPy keeps for itself (was: 'the compiled program does not fit')",
        "kind: smart\ninputs: {instructions: {type: string}}\noutputs: {a: {type: string}}\n",
        [(B, 3, "instructions", "BY359")],
    ),
    (
        "executors/smart.py: an output with a leading underscore",
        "kind: smart\noutputs:\n  ok: {type: string}\n  _hidden: {type: string}\n",
        [(B, 5, "_hidden", "BY359")],
    ),
    (
        "executors/smart.py: a name that is an input and an output (DSPy kept only the output)",
        "kind: smart\ninputs: {text: {type: string}}\noutputs: {text: {type: string}}\n",
        [(B, 4, "text", "BY359")],
    ),
    (
        "executors/memory.py: memory block without memory",
        "kind: memory_read\noutputs: {v: {type: any}}\n",
        [(B, 2, "memory_read", "BY355")],
    ),
    (
        "executors/memory.py: memory_read without outputs",
        "kind: memory_read\nmemory: {namespace: history}\n",
        [(B, 2, "memory_read", "BY358")],
    ),
    (
        "executors/memory.py: memory_write with outputs",
        "kind: memory_write\nmemory: {namespace: history}\ninputs: {v: {type: any}}\noutputs: {w: {type: any}}\n",
        [(B, 5, "outputs", "BY356")],
    ),
    (
        "executors/memory.py: memory_write of a preference without a key",
        "kind: memory_write\nmemory: {namespace: preferences}\ninputs: {v: {type: any}}\n",
        [(B, 3, "memory", "BY443")],
    ),
    (
        "executors/memory.py: memory_write with nothing to store",
        "kind: memory_write\nmemory: {namespace: history, key: '{{ v }}'}\ninputs: {v: {type: string}}\n",
        [(B, 3, "key", "BY444")],
    ),
    (
        "agents/executor.py: agent without outputs",
        "kind: agent\nprompt: {user: hi}\n",
        [(B, 2, "agent", "BY358")],
    ),
    (
        "agents/executor.py: a tool called final_answer (which is no tool either)",
        "kind: agent\nprompt: {user: hi}\noutputs: {a: {type: string}}\ntools: [final_answer]\n",
        [(B, 5, "final_answer", "BY442"), (B, 5, "final_answer", "BY501")],
    ),
]


@pytest.mark.parametrize(
    ("flow", "blocks", "expected"), [pytest.param(*case[1:], id=case[0]) for case in FLOW_RULES]
)
def test_each_former_compiler_rule_of_a_flow_is_reported_where_it_is_written(
    make_yard: MakeYard, flow: str, blocks: dict[str, str], expected: list[Expected]
) -> None:
    found, root = problems(make_yard, flow, blocks)
    assert found == [at(root, e) for e in expected]


@pytest.mark.parametrize(
    ("block", "expected"), [pytest.param(*case[1:], id=case[0]) for case in BLOCK_RULES]
)
def test_each_former_executor_rule_of_a_block_is_reported_where_it_is_written(
    make_yard: MakeYard, block: str, expected: list[Expected]
) -> None:
    found, root = problems(make_yard, one_step("{id: s, uses: inc}"), {"b": f"block: b\n{block}"})
    assert found == [at(root, e) for e in expected]


def test_a_yard_tool_called_final_answer_is_refused_where_an_agent_is_offered_it(
    make_yard: MakeYard,
) -> None:
    config = "tools:\n  final_answer: {import: 'tools.answers:final_answer'}\n"
    blocks = {"lead": agent("lead", "tools: [final_answer]\n")}
    found, root = problems(make_yard, one_step("{id: s, uses: lead}"), blocks, config=config)
    assert found == [at(root, ("blocks/lead.yaml", 6, "final_answer", "BY442"))]


@pytest.mark.parametrize("depth", [8, 9])
def test_delegation_depth_is_counted_as_the_compiler_follows_it(
    make_yard: MakeYard, depth: int
) -> None:
    blocks = {
        f"a{i}": agent(f"a{i}", f"delegates: [a{i + 1}]\n" if i + 1 < depth else "")
        for i in range(depth)
    }
    found, root = problems(make_yard, one_step("{id: s, uses: a0}"), blocks)
    assert found == ([at(root, (F, 3, "a0", "BY440"))] if depth > 8 else [])


def test_a_delegated_flow_is_a_level_and_a_subflow_is_not(make_yard: MakeYard) -> None:
    blocks = {
        f"a{i}": agent(f"a{i}", f"delegates: [a{i + 1}]\n" if i < 6 else "") for i in range(7)
    }  # 7 levels
    blocks["lead"] = agent("lead", "delegates: [seven]\n")
    flows = {
        "seven": "flow: seven\nsteps:\n  - {id: s, uses: a0}\n",
        "wrapped": "flow: wrapped\nsteps:\n  - {id: w, flow: seven}\n",
    }
    # lead -> flow 'seven' -> a0 ... a6 is nine levels; a `flow:` step runs its subflow at its own level
    found, root = problems(
        make_yard,
        "flow: f\nsteps:\n  - {id: s, uses: lead}\n  - {id: t, flow: wrapped}\n",
        blocks,
        flows,
    )
    assert found == [at(root, (F, 3, "lead", "BY440"))]


def test_steps_that_delegate_to_each_other_are_refused_without_hanging(make_yard: MakeYard) -> None:
    flow = "flow: f\nsteps:\n  - {id: a, uses: helper, delegates: [b]}\n  - {id: b, uses: helper, delegates: [a]}\n"
    result: list[tuple[list[Found], Path]] = []
    worker = threading.Thread(target=lambda: result.append(problems(make_yard, flow)), daemon=True)
    worker.start()
    worker.join(20)  # the dataflow used to follow the delegators' regions round the cycle forever
    assert not worker.is_alive(), "validate hangs"
    found, root = result[0]
    assert found == [at(root, (F, 3, "b]", "BY320")), at(root, (F, 4, "a]", "BY320"))]


def test_a_delegated_step_may_delegate_to_another_delegated_step_of_its_list(
    make_yard: MakeYard,
) -> None:
    flow = (
        "flow: f\noutputs: [answer]\nsteps:\n  - {id: a, uses: helper, delegates: [b]}\n"
        "  - {id: b, uses: helper, delegates: [c]}\n  - {id: c, uses: helper}\n"
    )
    # as the compiler builds it: c is a delegate of b, both of a's list
    assert problems(make_yard, flow)[0] == []
