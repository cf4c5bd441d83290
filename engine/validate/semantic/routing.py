"""Branches of decide steps and router rules."""

from __future__ import annotations

from functools import lru_cache

from engine.core.diagnostics import did_you_mean
from engine.spec.block import article
from engine.spec.flow import TEXT_CONDITIONS, RegexRoute
from engine.validate.semantic.control import decide_values
from engine.validate.semantic.index import FlowIndex, StepNode, quote_list


def check_routing(index: FlowIndex) -> None:
    for node in index.walk():
        if node.spec.branches is not None:
            _branches(index, node)
        if node.spec.router is not None:
            _router(index, node)


def _branches(index: FlowIndex, node: StepNode) -> None:
    branches = node.spec.branches or {}
    if node.action != "uses" or node.block is None:
        if node.action not in ("uses", None):
            index.report(
                node.at("branches"),
                "BY310",
                f"step '{node.id}' has branches, but branches follow the value of a decide block "
                f"and this is {article(node.action)} step (use a router to branch on a value)",
                key=True,
            )
            index.broken = True
        return
    block = node.block.spec
    if block.kind != "decide":
        index.report(
            node.at("branches"),
            "BY310",
            f"step '{node.id}' has branches, but block '{block.block}' is {article(block.kind)} block; "
            "branches follow a decide block's enum (use a router to branch on a value)",
            key=True,
        )
        index.broken = True
        return
    values = decide_values(node)
    if values is None:
        return  # the block's own check (BY353) explains what is missing
    for value in branches:
        if value not in values:
            index.report(
                node.at("branches", value),
                "BY311",
                f"step '{node.id}': branch '{value}' is not a value of block '{block.block}' "
                f"(its values are {quote_list(values)}){did_you_mean(value, values)}",
                key=True,
            )
    missing = [value for value in values if value not in branches]
    if missing and not node.spec.goto:
        follower = node.region.next_after(node)
        then = (
            f"continue with the next step '{follower.id}'"
            if follower is not None
            else "end the flow"
        )
        noun = "value" if len(missing) == 1 else "values"
        index.report(
            node.at("branches"),
            "BY312",
            f"step '{node.id}': decide {noun} {quote_list(missing)} of block '{block.block}' "
            f"{'has' if len(missing) == 1 else 'have'} no branch and will {then}",
            key=True,
        )


def _router(index: FlowIndex, node: StepNode) -> None:
    router = node.spec.router
    assert router is not None
    text_rules = []
    for position, route in enumerate(router.routes):
        where = node.at("router", "routes", position)
        # a rule says exactly one condition by its model's shape (BY314, engine/spec/flow.py)
        if route.kind in TEXT_CONDITIONS:
            text_rules.append(position)
        if isinstance(route, RegexRoute):
            problem = regex_problem(route.regex)
            if problem is not None:
                index.report(
                    (*where, "regex"),
                    "BY313",
                    f"step '{node.id}': regex '{route.regex}' does not compile: {problem}",
                )
    if text_rules and router.value is None:
        index.report(
            node.at("router", "routes", text_rules[0]),
            "BY315",
            f"step '{node.id}': router rule {text_rules[0] + 1} matches text, but the router has no "
            '`value:` to match it against (e.g. value: "{{ context.status }}")',
        )


@lru_cache(maxsize=1024)
def regex_problem(pattern: str) -> str | None:
    """None when RE2 (the engine's regex library: linear time, no backtracking) accepts `pattern`."""
    import re2  # google-re2; imported here so flows without regex rules never load it

    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of the error on stderr
    try:
        re2.compile(pattern, options=options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else str(exc)
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    return None
