"""The validator is the only judge of what a user may write (docs/architecture.md, "Where a rule
lives"): the compiler, the executors and the agent loop raise only failures that depend on run-time
data (a step failed), a broken promise of the validator (an internal error, naming the rule that
should have refused the input), or — for a smart block — a missing installation. Never a user
diagnostic of their own: a new rule belongs in engine/validate/ with a code."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest
from langgraph.errors import GraphRecursionError

from engine.agents.plan import AgentFailed
from engine.compile import compile_flow
from engine.compile.blockstep import BlockStep
from engine.core.errors import BlockyardError, RunError
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from engine.models.errors import ModelError
from engine.nodes import errors, events
from engine.nodes.errors import InternalError, Problem, StepFailed, internal
from engine.smart import lm
from engine.validate.codes import all_codes

ENGINE = Path(__file__).resolve().parents[2] / "engine"
SCANNED = ("compile", "executors", "agents")

# What a raise may build, by the name it calls, and the class that call gives.
RUN_TIME: dict[str, type[BaseException]] = {
    "StepFailed": StepFailed,  # a step of a run failed
    "failed": StepFailed,  # engine/nodes/events.py: emits step_failed, returns the StepFailed
    "_failed": StepFailed,  # BlockStep._failed: the same for block steps
    "Problem": Problem,  # a deterministic failure inside a step (a template on the run's values, ...)
    "AgentFailed": AgentFailed,  # an agent that did not finish on this run
    "model_failure": ModelError,  # a model call that failed
    "RunError": RunError,  # a run that ended without its outputs, or over its step limit
    # over its step limit, as LangGraph says it, in a run without LangGraph's loop (compile/direct.py)
    "GraphRecursionError": GraphRecursionError,
    "_Bad": Exception,  # engine/compile/subflow.py: a subflow input that did not render on this run's values
}
INTERNAL = {"internal": InternalError, "InternalError": InternalError}
# A validated flow this installation cannot build: a smart block without DSPy, or whose compiled
# program no longer fits it. Only there.
ENVIRONMENT = {("executors/smart.py", "CompileError")}
# Python's own protocols: a module's `__getattr__` (PEP 562) says "no such name" with AttributeError.
PROTOCOL = {("compile/__init__.py", "AttributeError")}


def raise_sites() -> list[tuple[str, int, str, ast.Raise]]:
    """(module, line, the name the raise calls or raises, node) of every raise with an exception."""
    sites = []
    for package in SCANNED:
        for path in sorted((ENGINE / package).rglob("*.py")):
            module = str(path.relative_to(ENGINE))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Raise) or node.exc is None:
                    continue
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                name = (
                    target.attr
                    if isinstance(target, ast.Attribute)
                    else getattr(target, "id", ast.dump(target))
                )
                sites.append((module, node.lineno, name, node))
    return sites


def test_every_raise_site_is_a_run_time_failure_or_an_internal_error() -> None:
    sites = raise_sites()
    assert len(sites) > 30  # the scan sees the packages
    refused = [
        f"engine/{module}:{line}: raise {name}"
        for module, line, name, _ in sites
        if name not in RUN_TIME
        and name not in INTERNAL
        and (module, name) not in ENVIRONMENT | PROTOCOL
    ]
    assert refused == [], "a user rule in the compiler: move it to engine/validate/ with a code"


def test_every_internal_error_names_the_rule_that_should_have_refused_the_input() -> None:
    codes = set(all_codes())
    calls = [
        (module, line, node.exc) for module, line, name, node in raise_sites() if name == "internal"
    ]
    # the scan finds them (14 on 2026-11-29: a block kind's and a router rule's keys are their models' shape,
    # engine/spec/, so their executors and matchers check nothing again)
    assert len(calls) >= 10
    for module, line, call in calls:
        assert isinstance(call, ast.Call) and len(call.args) == 2, f"engine/{module}:{line}"
        code = call.args[1]
        assert isinstance(code, ast.Constant) and isinstance(code.value, str), (
            f"engine/{module}:{line}"
        )
        named = re.findall(r"BY\d{3}", code.value)
        assert named and set(named) <= codes, f"engine/{module}:{line}: {code.value}"


def test_the_allowed_names_give_what_they_claim() -> None:
    assert typing.get_type_hints(events.failed)["return"] is StepFailed
    assert typing.get_type_hints(BlockStep._failed)["return"] is StepFailed
    assert typing.get_type_hints(lm.model_failure)["return"] is ModelError
    for kind in (StepFailed, Problem, AgentFailed, RunError):
        assert issubclass(kind, Exception)
    assert not issubclass(InternalError, BlockyardError)  # a bug: exit 4, never an ordinary failure
    assert issubclass(errors.CompileError, BlockyardError)


def test_an_internal_error_says_it_is_a_bug_and_names_the_rule() -> None:
    error = internal("flow 'f', step 's': a router rule without a condition", "BY314")
    assert str(error) == (
        "bug: the validator should have refused flow 'f', step 's': a router rule without a "
        "condition (BY314)"
    )


def test_input_the_validator_refuses_is_an_internal_error_if_it_reaches_the_compiler(
    make_yard: typing.Callable[[dict[str, str]], Path],
) -> None:
    root = make_yard(
        {
            "blocks/inc.yaml": "block: inc\nkind: transform\noutputs: {n: {type: integer}}\ncompute: {n: '1'}\n",
            "flows/f.yaml": "flow: f\nsteps:\n  - {id: s, uses: inc, goto: nowhere}\n",
        }
    )
    with pytest.raises(InternalError, match="bug: the validator should have refused") as caught:
        compile_flow(make_bundle(load_project(root), "f"))
    assert str(caught.value) == (
        "bug: the validator should have refused flow 'f', step 's': goto 'nowhere', which "
        "is not a step of the flow (BY212, BY213)"
    )


def test_a_chain_of_delegated_steps_compiles(
    make_yard: typing.Callable[[dict[str, str]], Path],
) -> None:
    agent = (
        "block: helper\nkind: agent\ninputs: {task: {type: string, default: ''}}\n"
        "outputs: {answer: {type: string}}\nprompt: {user: '{{ task }}'}\n"
    )
    root = make_yard(
        {
            "blocks/helper.yaml": agent,
            "flows/f.yaml": (
                "flow: f\nsteps:\n  - {id: a, uses: helper, delegates: [b]}\n  - {id: b, uses: "
                "helper, delegates: [c]}\n"
                "  - {id: c, uses: helper}\n"
            ),
        }
    )
    # what validate accepts (BY213 no longer)
    compiled = compile_flow(make_bundle(load_project(root), "f"))
    assert "a" in compiled.graph.nodes and "b" not in compiled.graph.nodes
