"""The yard's own rules: `policy:` in blockyard.yaml (docs/review.md), each violation where it is written.

BY810 a provider the policy does not allow, BY811 a model name it does not allow, BY812 an agent
allowed more turns than the cap, BY813 a loop or a step's visits bounded above the cap, BY814 a
step that runs a tool the policy keeps behind approval without an approval gate, BY815 a gate
without a timeout, BY816 a host for http_request outside the policy's hosts.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from engine.core.diagnostics import Diagnostic
from engine.definitions.load import Document, JsonPath
from engine.definitions.project import Project, is_builtin
from engine.spec import BlockSpec, ModelBlock, ModelProfile, StepSpec
from engine.spec.block import DEFAULT_MAX_ITERATIONS, called_tools
from engine.spec.config import PolicySpec
from engine.spec.walk import walk_steps
from engine.templates.render import is_template

HTTP_TOOL = "http_request"


def check_policy(project: Project) -> list[Diagnostic]:
    """Every violation of the yard's `policy:` (none without one)."""
    policy = project.config.policy
    if policy == PolicySpec():
        return []
    found: list[Diagnostic] = []
    config = project.config_doc
    if config is not None:
        for name, profile in project.config.models.items():
            found += _profile(policy, profile, config, ("models", name))
        found += _config_hosts(policy, project, config)
    for versions in project.blocks.values():
        for definition in versions.values():
            if is_builtin(definition):
                continue
            spec, doc = definition.spec, definition.doc
            if isinstance(spec, ModelBlock) and isinstance(spec.model, ModelProfile):
                found += _profile(policy, spec.model, doc, ("model",))
            found += _agent_turns(policy, spec, doc)
    for flow in project.flows.values():
        found += _flow(policy, project, flow.spec.steps, flow.doc)
    return found


def _profile(
    policy: PolicySpec, profile: ModelProfile, doc: Document, at: JsonPath
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    allowed = policy.models.providers
    if allowed is not None and profile.provider not in allowed:
        found.append(
            doc.diag(
                (*at, "provider"),
                "BY810",
                (
                    f"provider '{profile.provider}' is not allowed by the yard's policy (policy.models.providers: "
                    f"{', '.join(allowed) or 'none'})"
                ),
            )
        )
    names = policy.models.names
    if (
        names is not None
        and profile.name is not None
        and not any(fnmatch.fnmatchcase(profile.name, pattern) for pattern in names)
    ):
        found.append(
            doc.diag(
                (*at, "name"),
                "BY811",
                (
                    f"model '{profile.name}' is not allowed by the yard's policy (policy.models.names: "
                    f"{', '.join(names) or 'none'})"
                ),
            )
        )
    return found


def _agent_turns(policy: PolicySpec, spec: BlockSpec, doc: Document) -> list[Diagnostic]:
    cap = policy.max_agent_iterations
    if cap is None or spec.kind != "agent":
        return []
    turns = spec.max_iterations or DEFAULT_MAX_ITERATIONS
    if turns <= cap:
        return []
    if spec.max_iterations is None:
        return [
            doc.diag(
                ("kind",),
                "BY812",
                (
                    f"agent block '{spec.block}' takes up to {DEFAULT_MAX_ITERATIONS} turns (the default), above the "
                    f"policy's cap of {cap} (policy.max_agent_iterations): set `max_iterations:` to {cap} or fewer"
                ),
            )
        ]
    return [
        doc.diag(
            ("max_iterations",),
            "BY812",
            (
                f"max_iterations {turns} of agent block '{spec.block}' is above the policy's cap of {cap} "
                "(policy.max_agent_iterations)"
            ),
        )
    ]


def _flow(
    policy: PolicySpec, project: Project, steps: list[StepSpec], doc: Document
) -> Iterator[Diagnostic]:
    walked = list(walk_steps(steps))
    for item in walked:
        step, path = item.step, item.path
        cap = policy.max_loop_iterations
        if cap is not None and step.loop is not None and step.loop.max_iterations > cap:
            yield doc.diag(
                (*path, "loop", "max_iterations"),
                "BY813",
                (
                    f"loop '{step.id}' may run {step.loop.max_iterations} iterations, above the policy's cap of {cap} "
                    "(policy.max_loop_iterations)"
                ),
            )
        if cap is not None and step.max_visits is not None and step.max_visits > cap:
            yield doc.diag(
                (*path, "max_visits"),
                "BY813",
                (
                    f"step '{step.id}' allows {step.max_visits} visits, above the policy's cap of {cap} "
                    "(policy.max_loop_iterations)"
                ),
            )
        if policy.gate_timeout:
            for key, gate in (
                ("approval", step.approval),
                ("require_approval", step.require_approval),
            ):
                if gate is True or (
                    gate not in (None, False) and getattr(gate, "timeout", None) is None
                ):
                    yield doc.diag(
                        (*path, key),
                        "BY815",
                        (
                            f"the approval gate of step '{step.id}' has no `timeout:`; the yard's policy requires one "
                            "on every gate (policy.gate_timeout)"
                        ),
                        key=True,
                    )
        guarded = _guarded_tools(policy, project, step)
        if (
            guarded
            and step.require_approval is False
            and not _after_gate(item.list.steps, item.position)
        ):
            yield doc.diag(
                (*path, "uses" if step.uses else "map"),
                "BY814",
                (
                    f"step '{step.id}' runs {', '.join(guarded)} without an approval gate; the "
                    "yard's policy requires one "
                    "(policy.approval_before_tools): add `require_approval:` or an `approval:` step right before it"
                ),
                key=True,
            )
        yield from _step_hosts(policy, project, step, doc, path)


def _blocks_of(project: Project, step: StepSpec) -> list[BlockSpec]:
    refs = [ref for ref in (step.uses, step.map.uses if step.map is not None else None) if ref]
    return [found.spec for ref in refs if (found := project.block(ref)) is not None]


def _guarded_tools(policy: PolicySpec, project: Project, step: StepSpec) -> list[str]:
    """The tools of `policy.approval_before_tools` a step's block may call."""
    if not policy.approval_before_tools:
        return []
    tools: list[str] = []
    for block in _blocks_of(project, step):
        tools += called_tools(block)
    return sorted(set(tools) & set(policy.approval_before_tools))


def _after_gate(steps: list[StepSpec], position: int) -> bool:
    """Whether the step right before, in list order, is an approval step that goes on to this one."""
    if position == 0:
        return False
    before, step = steps[position - 1], steps[position]
    return before.approval is not None and before.goto in (None, step.id)


def _config_hosts(policy: PolicySpec, project: Project, doc: Document) -> list[Diagnostic]:
    allowed = policy.http_hosts
    if allowed is None:
        return []
    return [
        doc.diag(
            ("http", "allowed_hosts", number),
            "BY816",
            (
                f"http.allowed_hosts names '{host}', which the yard's policy does not allow (policy.http_hosts: "
                f"{', '.join(allowed) or 'none'})"
            ),
        )
        for number, host in enumerate(project.config.http.allowed_hosts)
        if not _host_allowed(host, allowed)
    ]


def _step_hosts(
    policy: PolicySpec, project: Project, step: StepSpec, doc: Document, path: JsonPath
) -> Iterator[Diagnostic]:
    allowed = policy.http_hosts
    if allowed is None or not any(
        HTTP_TOOL in called_tools(block) for block in _blocks_of(project, step)
    ):
        return
    url: Any = step.with_.get("url")
    if not isinstance(url, str) or is_template(url):
        return
    host = urlsplit(url).hostname or ""
    if not _host_allowed(host, allowed):
        yield doc.diag(
            (*path, "with", "url"),
            "BY816",
            (
                f"step '{step.id}' calls http_request on host '{host}', which the yard's policy does not allow "
                f"(policy.http_hosts: {', '.join(allowed) or 'none'})"
            ),
        )


def _host_allowed(host: str, allowed: list[str]) -> bool:
    """`host` (a name, `*.example.com` or `*`) within the policy's hosts (names or patterns)."""
    host = host.lower().rstrip(".")
    return any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in allowed)
