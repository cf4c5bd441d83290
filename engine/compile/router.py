"""`router:` steps: ordered rules over a value; the first that matches picks the next step.

Text rules look at the rendered `value` as text: `contains` and `starts_with` are
case-sensitive, `equals` is case-insensitive, `regex` is RE2 (linear time: no catastrophic
backtracking, no backreferences). `expr` rules are bare Jinja expressions over the scope.
A plain block step leading only to the router runs it inline (`GraphBuilder.follower`).

Besides the step scope, the value and the rules see the run's conversation: `messages`, a list
of `{role, content}` (user, assistant, system, tool; oldest first) from the state's messages,
and `last_message`, the content of the last one. In a thread turn that is the turn's message
(until a step of the turn adds to the conversation); in a run that is not a thread turn and holds
no messages, `messages` is the `message` input (when it is text) as one user message, or empty,
and `last_message` is that text or "" (docs/flows.md, "Router").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import re2  # google-re2: never Python's backtracking `re` on a user's pattern
from langgraph.runtime import Runtime
from langgraph.types import Command

from engine.compile.builder import Built, GraphBuilder, Region
from engine.compile.state import State, record
from engine.core.values import JsonDict
from engine.nodes.context import RunContext
from engine.nodes.errors import internal
from engine.nodes.events import STEP_STARTED, elapsed_ms, emit, failed, finished
from engine.nodes.scope import item_index, make_scope
from engine.spec.flow import (
    ContainsRoute,
    EqualsRoute,
    RegexRoute,
    Route,
    RouterStep,
    StartsWithRoute,
    enum_text,
)
from engine.templates.render import TemplateError, evaluate, render

Matcher = Callable[[str, Mapping[str, Any]], bool]


def build(builder: GraphBuilder, region: Region, step: RouterStep) -> Built:
    spec = step.router
    where = builder.where(step.id)
    rules = [
        (_matcher(route, where, position), route.goto)
        for position, route in enumerate(spec.routes, 1)
    ]
    frames = region.frames
    label = builder.label(step.id)
    built = Built([step.id])

    async def node(state: State, runtime: Runtime[RunContext]) -> Command[Any]:
        writer = runtime.stream_writer
        index = item_index(state, frames)
        started = time.monotonic()
        emit(writer, STEP_STARTED, label, {"block": None, "kind": "router"}, index)
        scope = make_scope(state, frames, conversation(state))
        try:
            text = as_text(render(spec.value, scope)) if spec.value is not None else ""
            target = next((goto for matches, goto in rules if matches(text, scope)), spec.default)
        except TemplateError as exc:
            raise failed(
                writer, builder.flow, label, str(exc), started=started, index=index
            ) from None
        extra = {"value": text} if spec.value is not None else {}
        finished(
            writer, label, {"goto": target}, duration_ms=elapsed_ms(started), index=index, **extra
        )
        goto = list(dict.fromkeys([*region.resolve(target), *built.after]))
        return Command(update={"results": [record(step.id, None, {"goto": target})]}, goto=goto)

    builder.follower(step.id, node)
    return built


def conversation(state: Mapping[str, Any]) -> JsonDict:
    """`messages` and `last_message` of a router's scope."""
    said = [
        {
            "role": _ROLES.get(getattr(m, "type", ""), str(getattr(m, "type", "user"))),
            "content": _content(getattr(m, "content", "")),
        }
        for m in state.get("messages") or ()
    ]
    if not said:
        message = (state.get("inputs") or {}).get("message")
        said = [{"role": "user", "content": message}] if isinstance(message, str) else []
    return {"messages": said, "last_message": said[-1]["content"] if said else ""}


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content or "")


def as_text(value: Any) -> str:
    """What text rules see: strings as they are, true/false/null for the JSON constants."""
    return (
        value
        if isinstance(value, str)
        else enum_text(value)
        if value is None or isinstance(value, bool)
        else str(value)
    )


def _matcher(route: Route, where: str, position: int) -> Matcher:
    if isinstance(route, ContainsRoute):
        needle = route.contains
        return lambda text, _: needle in text
    if isinstance(route, EqualsRoute):
        wanted = route.equals.casefold()
        return lambda text, _: text.casefold() == wanted
    if isinstance(route, StartsWithRoute):
        prefix = route.starts_with
        return lambda text, _: text.startswith(prefix)
    if isinstance(route, RegexRoute):
        pattern = compile_regex(route.regex, f"{where}: router rule {position}")
        return lambda text, _: pattern.search(text) is not None
    expression = route.expr
    return lambda _, scope: bool(evaluate(expression, scope))


def compile_regex(pattern: str, where: str) -> Any:
    """An RE2 pattern (linear-time matching); the validator checked that RE2 accepts it."""
    options = re2.Options()
    options.log_errors = False  # RE2 would also print the error on stderr
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise internal(f"{where}: regex '{pattern}' that RE2 rejects ({text})", "BY313") from None
