"""The ReAct loop of one agent as a LangGraph graph of its own.

    agent ──(answer)──────────────────────────────> end
      │ tool calls, one Send each (run in parallel)
      ├──> tools             (the block's `tools`: the registry validates and calls them)
      ├──> delegate.<name>   (one node per sub-agent: an agent block, an agent step, a flow)
      └──> agent again       (nothing to run: a malformed call or a rejected answer was answered)

Every call gets exactly one tool message back (a result or an error), in the order the model
made them; the agent node runs once after all of them. The graph is compiled once per agent
and invoked inside the step's node without a checkpointer: an agent is one step of the flow,
so a crash or a retry starts it from its first turn.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import time
from typing import Annotated, Any, TypedDict

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from engine.agents import approval, transcript
from engine.agents.answer import read_answer, repair_note
from engine.agents.plan import MAX_TOOL_ERRORS, AgentFailed, AgentPlan, AgentRun, Delegate
from engine.core.errors import BlockyardError
from engine.core.redaction import TokenMasker
from engine.core.values import JsonDict, JsonValue, value_problem
from engine.models.agentic import TurnRequest
from engine.models.errors import ModelError
from engine.nodes.context import RunContext
from engine.nodes.errors import Problem, StepFailed
from engine.nodes.events import TOKEN, TOOL_CALL, elapsed_ms, emit, warning
from engine.nodes.policies import policies
from engine.spec.block import ANSWER_TOOL

AGENT, TOOLS = "agent", "tools"
DELEGATE = "delegate.{}"
EVENT_LIMIT = 4_000  # characters of a tool's arguments or result shown in an event


class AgentState(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    turn: int
    errors: Annotated[int, operator.add]
    pending: list[DispatchedCall]  # the calls of the last reply still to run
    answer: JsonDict | None


class DispatchedCall(TypedDict):
    """One tool call of the model's reply with the node that answers it (`_dispatched`)."""

    name: str
    args: JsonValue  # what the model gave: an object when it is well-formed
    id: str
    node: str  # the tool node, or a sub-agent's delegate node
    nth: int  # which call of its name in the turn (1, 2, ...)


class CallPayload(TypedDict):
    """What a tool or delegate node gets through `Send`: one call the model asked for."""

    call: DispatchedCall


def compile_graph(plan: AgentPlan) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The loop of `plan` as a compiled graph (context: AgentRun)."""
    retry = policies(plan.block).retry
    graph: StateGraph[Any, AgentRun, Any, Any] = StateGraph(AgentState, context_schema=AgentRun)
    graph.add_node(AGENT, _agent_node, retry_policy=retry)
    graph.add_node(TOOLS, _tool_node)
    targets = [AGENT, TOOLS, END]
    for delegate in plan.delegates:
        name = DELEGATE.format(delegate.name)
        graph.add_node(name, _delegate_node(delegate), retry_policy=delegate.retry)
        graph.add_edge(name, AGENT)
        targets.append(name)
    graph.add_edge(START, AGENT)
    graph.add_conditional_edges(AGENT, _route, targets)
    graph.add_edge(TOOLS, AGENT)
    # A loop that may wait for a person keeps checkpoints in the run's (LangGraph's own for a graph
    # invoked in a node, under the node's namespace): resumed, it goes on where it waited. Any other
    # keeps none: one step of the flow, it is checkpointed after it like any step.
    return graph.compile(
        checkpointer=None if plan.pauses else False, name=f"agent {plan.block.block}"
    )


def recursion_limit(plan: AgentPlan) -> int:
    """Two supersteps per turn (the model, then its calls), the input step, and slack."""
    return 2 * plan.max_iterations + 3


def _route(state: AgentState) -> Any:
    if state.get("answer") is not None:
        return END
    pending = state.get("pending") or []
    if not pending:
        return AGENT
    return [Send(call["node"], {"call": call}) for call in pending]


async def _agent_node(state: AgentState, runtime: Runtime[AgentRun]) -> dict[str, Any]:
    run = runtime.context
    plan = run.plan
    if state.get("errors", 0) > MAX_TOOL_ERRORS:
        raise AgentFailed(
            f"agent '{plan.block.block}' gave up after {state.get('errors')} failed tool calls "
            f"(at most {MAX_TOOL_ERRORS} are allowed); the last: {run.failures[-1]['error']}"
        )
    turn = state.get("turn", 0) + 1
    last = turn >= plan.max_iterations
    before, request = _turn_request(run, state, turn, last)
    reply = await _ask(run, request, runtime)
    said = transcript.stamped(reply, name=run.label)
    assert isinstance(said, AIMessage)
    problem = _reply_problem(said)
    if problem is not None:  # it would poison the checkpoint and the trace: the step fails instead
        raise AgentFailed(f"agent '{plan.block.block}', turn {turn}: the model's reply {problem}")
    answer = read_answer(said, plan.block.outputs, transcript.text_of(said))
    update: dict[str, Any] = {"turn": turn, "messages": [*before, said], "pending": []}
    if answer.outputs is not None:
        _tell_answer(run, answer.outputs, answer.call_id)
        update["answer"] = answer.outputs
        update["messages"].extend(
            _skipped(said, "not run: the final answer was given in the same turn")
        )
        return update
    if last:
        raise AgentFailed(_exhausted(plan, said, answer.problem))
    if answer.problem is not None:
        if answer.call_id is not None:
            update["messages"].append(
                transcript.tool_result(answer.call_id, ANSWER_TOOL, error=answer.problem)
            )
            update["messages"].extend(_skipped(said, "not run: the turn gave a final answer"))
        else:
            update["messages"].append(transcript.note(repair_note(answer.problem)))
        return update
    update["messages"].extend(_invalid_calls(run, said))
    update["pending"] = _dispatched(run, said.tool_calls)
    update["errors"] = len(said.invalid_tool_calls)
    return update


def _turn_request(
    run: AgentRun, state: AgentState, turn: int, last: bool
) -> tuple[list[BaseMessage], TurnRequest]:
    """What this turn adds before the model's reply (on the last turn, a note to answer now), and the
    request: on the last turn only the answer tool is offered, and forced."""
    plan = run.plan
    before: list[BaseMessage] = []
    if last and plan.max_iterations > 1:
        before.append(
            transcript.note(
                f"This is your last turn (max_iterations: {plan.max_iterations}). Call "
                f"{ANSWER_TOOL} now with your final answer."
            )
        )
    request = TurnRequest(
        flow=run.call.flow,
        step=run.call.step,
        block=plan.block.block,
        messages=(*state.get("messages", []), *before),
        tools=(run.answer,) if last else run.offered,
        answer_tool=ANSWER_TOOL,
        answer_schema=run.answer["function"]["parameters"],
        inputs=run.call.inputs,
        turn=turn,
        force_answer=last,
    )
    return before, request


def _tell_answer(run: AgentRun, outputs: JsonDict, call_id: str | None) -> None:
    """The final answer, told as a call of the answer tool (no tool runs)."""
    emit(
        run.call.writer,
        TOOL_CALL,
        run.label,
        {
            "tool": ANSWER_TOOL,
            "args": _bounded(outputs),
            "call_id": call_id,
            "kind": "answer",
            "status": "ok",
            "block": run.plan.block.block,
        },
        run.call.index,
    )


def _invalid_calls(run: AgentRun, said: AIMessage) -> list[BaseMessage]:
    """The reply's tool calls whose arguments are no JSON object: each a failure told and recorded, and
    a tool result the model sees, so that it can try again."""
    results: list[BaseMessage] = []
    for bad in said.invalid_tool_calls:
        problem = f"the arguments of '{bad.get('name')}' are not a JSON object: {str(bad.get('args'))[:200]!r}"
        run.failures.append({"tool": str(bad.get("name")), "error": problem})
        emit(
            run.call.writer,
            TOOL_CALL,
            run.label,
            {
                "tool": bad.get("name"),
                "call_id": bad.get("id"),
                "block": run.plan.block.block,
                "status": "error",
                "error": problem,
            },
            run.call.index,
        )
        results.append(
            transcript.tool_result(bad.get("id") or "", str(bad.get("name")), error=problem)
        )
    return results


async def _ask(run: AgentRun, request: TurnRequest, runtime: Runtime[AgentRun]) -> Any:
    call = run.call

    def send(text: str) -> None:
        emit(
            call.writer,
            TOKEN,
            call.label,
            {"text": text, "block": run.plan.block.block},
            call.index,
        )

    token = TokenMasker(call.context.secrets, send)  # a key split over pieces is masked whole
    try:
        return await run.model.turn(request, token)
    except ModelError as exc:
        info = runtime.execution_info
        attempt = info.node_attempt if info is not None else 1
        step_policies = policies(run.plan.block)
        failed = StepFailed(
            call.flow, call.label, run.plan.block.block, str(exc), cause=exc, item=call.index
        )
        if step_policies.will_retry(failed, attempt):
            warning(
                call.writer,
                call.label,
                "retrying",
                f"turn {request.turn}, attempt {attempt} of {step_policies.attempts} failed: {exc}; retrying",
                block=run.plan.block.block,
                attempt=attempt,
            )
            raise
        raise AgentFailed(str(exc)) from exc
    finally:
        token.flush()


def _reply_problem(said: AIMessage) -> str | None:
    """What puts a model's reply outside the value domain (engine/core/values.py), or None."""
    problem = value_problem(said.content, "text")
    for call in [*said.tool_calls, *said.invalid_tool_calls]:
        problem = problem or value_problem(call.get("name"), "tool name")
        problem = problem or value_problem(call.get("args"), f"{call.get('name')}.args")
    return problem


def _dispatched(run: AgentRun, calls: list[Any]) -> list[DispatchedCall]:
    """Each tool call with the node that answers it (its sub-agent's, or the tool node: unknown names
    too) and, when the turn calls a name more than once, which call of it it is (`nth`)."""
    seen: dict[str, int] = {}
    dispatched: list[DispatchedCall] = []
    for call in calls:
        name = str(call.get("name"))
        seen[name] = seen.get(name, 0) + 1
        node = DELEGATE.format(name) if run.plan.delegate(name) is not None else TOOLS
        args = call.get("args") or {}
        dispatched.append(
            {
                "name": name,
                "args": args,
                "id": call.get("id") or "",
                "node": node,
                "nth": seen[name],
            }
        )
    return dispatched


def _skipped(message: AIMessage, why: str) -> list[BaseMessage]:
    return [
        transcript.tool_result(call.get("id") or "", call["name"], error=why)
        for call in message.tool_calls
        if call["name"] != ANSWER_TOOL
    ]


def _exhausted(plan: AgentPlan, said: AIMessage, problem: str | None) -> str:
    head = f"agent '{plan.block.block}' gave no final answer within max_iterations ({plan.max_iterations} turns)"
    called = [call["name"] for call in said.tool_calls if call["name"] != ANSWER_TOOL]
    if called:
        return f"{head}: its last turn called {', '.join(repr(n) for n in called)} instead of {ANSWER_TOOL}"
    if problem is not None:
        return f"{head}: its last answer was not accepted: {problem}"
    return head


async def _tool_node(state: CallPayload, runtime: Runtime[AgentRun]) -> dict[str, Any]:
    """One tool call (`state` is what `Send` carried, named as LangGraph's node protocol names it)."""
    run = runtime.context
    call = state["call"]
    allowed = run.plan.block.approve_tools.get(call["name"])
    if allowed is not None and run.offers(call["name"]):
        decided = approval.ask(run, call, allowed)  # the run waits here the first time
        if decided.rejected:
            return _rejected(run, call, decided)
        call = {**call, "args": decided.args}
    name, args = call["name"], call["args"]
    started = time.monotonic()
    _announce(run, call, "tool")
    error: str | None = None
    result: Any = None
    if not run.offers(name):
        error = f"there is no tool '{name}'; you can call: {', '.join(_names(run))}"
    else:
        try:
            result = await run.call.context.tools.call(name, args)
        except BlockyardError as exc:  # ToolError: bad arguments, a failing tool, an unknown one
            error = str(exc)
        except Exception as exc:
            error = f"tool '{name}' failed: {type(exc).__name__}: {exc}"
    return _answered(run, call, result, error, started)


def _delegate_node(delegate: Delegate) -> Any:
    validator = Draft202012Validator(delegate.parameters)

    async def node(payload: CallPayload, runtime: Runtime[AgentRun]) -> dict[str, Any]:
        run = runtime.context
        call = payload["call"]
        started = time.monotonic()
        info = runtime.execution_info
        attempt = info.node_attempt if info is not None else 1
        if attempt == 1:
            _announce(run, call, delegate.kind)
        problem = best_match(validator.iter_errors(call["args"]))
        if problem is not None:
            where = ".".join(str(p) for p in problem.absolute_path)
            text = f"at '{where}': {problem.message}" if where else problem.message
            return _answered(
                run,
                call,
                None,
                f"{delegate.kind} '{delegate.name}': invalid arguments: {text}",
                started,
            )
        # the delegate runs as a step of the calling flow: its run context and stream, not the agent's
        agents: Runtime[Any] = runtime
        outer: Runtime[RunContext] = dataclasses.replace(
            agents, context=run.call.context, stream_writer=run.call.writer
        )
        try:
            outputs = await delegate.invoke(dict(call["args"]), run, outer)
        except GraphBubbleUp:
            raise
        except StepFailed as exc:
            if delegate.will_retry(exc, attempt):
                raise  # the node's retry policy runs it again
            return _answered(
                run, call, None, f"{delegate.kind} '{delegate.name}' failed: {exc.reason}", started
            )
        except (Problem, BlockyardError) as exc:
            return _answered(run, call, None, f"{delegate.kind} '{delegate.name}': {exc}", started)
        return _answered(run, call, outputs, None, started)

    return node


def _announce(run: AgentRun, call: DispatchedCall, kind: str) -> None:
    emit(
        run.call.writer,
        TOOL_CALL,
        run.label,
        {
            "tool": call["name"],
            "args": _bounded(call["args"]),
            "call_id": call["id"],
            "kind": kind,
            "status": "started",
            "block": run.plan.block.block,
        },
        run.call.index,
    )


def _bounded(value: Any) -> Any:
    """`value` for an event: as it is, or its JSON cut to EVENT_LIMIT characters (a read file, a
    page fetched: events are stored and streamed; the model gets the whole result)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return (
        value if len(text) <= EVENT_LIMIT else text[:EVENT_LIMIT] + f"... [{len(text)} characters]"
    )


def _answered(
    run: AgentRun, call: DispatchedCall, result: Any, error: str | None, started: float
) -> dict[str, Any]:
    problem = value_problem(result, "result") if error is None else None
    if problem is not None:  # like a failing tool: the model is told, nothing unstorable is kept
        error, result = (
            f"tool '{call['name']}' returned a value the engine cannot hold: {problem}",
            None,
        )
    data: JsonDict = {
        "tool": call["name"],
        "call_id": call["id"],
        "block": run.plan.block.block,
        "status": "error" if error is not None else "ok",
        "duration_ms": elapsed_ms(started),
    }
    if error is not None:
        data["error"] = error
        run.failures.append({"tool": call["name"], "error": error})
    else:
        data["result"] = _bounded(result)
    emit(run.call.writer, TOOL_CALL, run.label, data, run.call.index)
    message = transcript.tool_result(call["id"], call["name"], result, error=error)
    return {"messages": [message], "errors": 1 if error is not None else 0}


def _rejected(run: AgentRun, call: DispatchedCall, decided: approval.Decided) -> dict[str, Any]:
    """A call a person rejected: nothing runs, and the model reads why as the call's result. Not a
    failed call (it does not count towards MAX_TOOL_ERRORS): a person's decision."""
    told = decided.told(call["name"])
    data: JsonDict = {
        "tool": call["name"],
        "args": _bounded(call["args"]),
        "call_id": call["id"],
        "kind": "tool",
        "block": run.plan.block.block,
        "status": "rejected",
        "error": told,
    }
    emit(run.call.writer, TOOL_CALL, run.label, data, run.call.index)
    return {"messages": [transcript.tool_result(call["id"], call["name"], error=told)]}


def _names(run: AgentRun) -> list[str]:
    return [tool["function"]["name"] for tool in run.offered]
