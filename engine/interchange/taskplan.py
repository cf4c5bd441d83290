"""TaskPlans -> flows (docs/taskplans.md): `blockyard run --plan`, `POST /plans/runs`,
`blockyard import taskplan`, and what `blockyard compose` asks a model for.

A plan is `{plan_id, user_intent, entry_step_id, steps: [{step_id, block_id, depends_on, branches?,
input_mappings?, require_approval?}], memory?, schedule?, inputs?}`. It becomes the flow:

- each step a step (`step_id` -> `id`, `block_id` -> `uses`, `input_mappings` -> `with`);
- `depends_on` -> `needs` (several steps depending on one run in parallel; a step depending on
  several waits for all), except on a step that names this one in its `branches`: that step
  leads here by the branch;
- `branches` as they are (a decide block's outcome -> step or `end`); `entry_step_id` the start;
- a step never runs because it comes next in the list: what follows a step is said by
  `depends_on` and `branches` only (the flow gets `goto: end` where the list would say otherwise);
- `memory` -> `memory:` as it is (`{scope}`: memory blocks and prompts that read memory need it);
- `schedule` -> `schedule: {cron, timezone, inputs?, misfire?}` (`human_readable` stays in the plan);
- the flow's inputs are the plan's `inputs`, else every `inputs.NAME` the mappings read; its
  outputs every output of its blocks (optional).

The flow is checked by the validator exactly like a flow file, with every diagnostic placed in
the plan: `plan.json:14:20: error BY210 steps[2].block_id: unknown block 'x'`.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError, ValidationFailed
from engine.core.values import JsonDict
from engine.definitions.load import Document, JsonPath, LoadError, load_bytes
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import Definition, FlowDef, Project
from engine.spec import FlowSpec
from engine.spec.flow import END, enum_text
from engine.spec.interchange import PlanStep, TaskPlan
from engine.templates.render import TemplateError, is_template, references
from engine.validate.semantic import check_flow

_RENAMED = {"step_id": "id", "block_id": "uses", "depends_on": "needs", "input_mappings": "with"}
_RENAMED_BACK = {flow: plan for plan, flow in _RENAMED.items()}


class PlanError(ValidationFailed):
    """A plan that does not convert, or whose flow does not validate: diagnostics placed in the plan."""

    code = "invalid_plan"
    http_status = 422


def read_plan(raw: bytes, display: str) -> Document:
    """A plan's text with the position of every value (JSON is read by the YAML loader: a subset)."""
    try:
        doc = load_bytes(raw, display)
    except LoadError as exc:
        d = exc.diagnostic
        raise PlanError(
            [Diagnostic(d.file, d.line, d.col, "BY850", f"not a JSON plan: {d.message}")]
        ) from None
    return doc


def parse_plan(doc: Document) -> TaskPlan:
    if not isinstance(doc.data, dict):
        raise PlanError(
            [
                doc.diag(
                    (),
                    "BY850",
                    "a TaskPlan is a JSON object {plan_id, user_intent, entry_step_id, steps}",
                )
            ]
        )
    try:
        return TaskPlan.model_validate(doc.data)
    except ValidationError as exc:
        found = []
        for error in exc.errors():
            loc = tuple(part for part in error["loc"] if isinstance(part, str | int))
            found.append(doc.diag(loc, "BY850", f"{plan_path(loc) or 'the plan'}: {error['msg']}"))
        raise PlanError(sorted(set(found))) from None


def plan_path(path: JsonPath) -> str:
    """`steps[2].block_id` for ("steps", 2, "block_id")."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def plan_flow(doc: Document, project: Project, *, name: str | None = None) -> JsonDict:
    """The flow data of a plan; raises PlanError for what only a plan can get wrong."""
    plan = parse_plan(doc)
    problems: list[Diagnostic] = []
    ids = [step.step_id for step in plan.steps]
    if plan.entry_step_id not in ids:
        problems.append(
            doc.diag(
                ("entry_step_id",),
                "BY851",
                f"entry_step_id: '{plan.entry_step_id}' is not a "
                f"step of the plan (its steps: {', '.join(ids)})",
            )
        )
    branched: dict[str, set[str]] = {}  # step -> the steps whose branches lead to it
    for step in plan.steps:
        for target in (step.branches or {}).values():
            branched.setdefault(target, set()).add(step.step_id)
    steps: list[JsonDict] = []
    for position, step in enumerate(plan.steps):
        here = ("steps", position)
        needs = [d for d in step.depends_on if d not in branched.get(step.step_id, set())]
        if needs and len(needs) != len(step.depends_on):
            problems.append(
                doc.diag(
                    (*here, "depends_on"),
                    "BY853",
                    f"{plan_path((*here, 'depends_on'))}: step '{step.step_id}' is a branch of "
                    f"{', '.join(sorted(branched[step.step_id]))} and also depends on "
                    f"{', '.join(needs)}; a branch target runs when its branch is taken",
                )
            )
        if (
            step.step_id != plan.entry_step_id
            and not step.depends_on
            and step.step_id not in branched
        ):
            problems.append(
                doc.diag(
                    (*here, "step_id"),
                    "BY852",
                    f"{plan_path((*here, 'step_id'))}: nothing leads to step '{step.step_id}': it "
                    "is not the entry, depends on no step and no branch names it",
                )
            )
        steps.append(_flow_step(step, needs, first=position == 0, entry=plan.entry_step_id))
    if problems:
        raise PlanError(sorted(set(problems)))
    _no_fall_through(steps, project)
    flow: JsonDict = {"flow": name or plan.plan_id, "description": plan.user_intent}
    inputs = (
        {k: v.model_dump(by_alias=True, exclude_unset=True) for k, v in (plan.inputs or {}).items()}
        if plan.inputs is not None
        else _read_inputs(plan)
    )
    if inputs:
        flow["inputs"] = inputs
    outputs = _outputs(plan, project)
    if outputs:
        flow["outputs"] = outputs
    if plan.memory is not None:
        flow["memory"] = plan.memory.model_dump(by_alias=True, exclude_unset=True)
    if plan.schedule is not None:
        rest = plan.schedule.model_dump(
            by_alias=True,
            exclude_unset=True,
            exclude={"cron_expression", "timezone", "human_readable"},
        )
        flow["schedule"] = {
            "cron": plan.schedule.cron_expression,
            "timezone": plan.schedule.timezone,
            **rest,
        }
    flow["steps"] = steps
    return flow


def _flow_step(step: PlanStep, needs: list[str], *, first: bool, entry: str) -> JsonDict:
    """One plan step as a flow step; `start: true` marks the entry when it is not the first in the list."""
    flow_step: JsonDict = {"id": step.step_id, "uses": step.block_id}
    if step.description:
        flow_step["description"] = step.description
    if step.input_mappings:
        flow_step["with"] = dict(step.input_mappings)
    if needs:
        flow_step["needs"] = needs
    if step.branches is not None:
        flow_step["branches"] = dict(step.branches)
    if step.require_approval:
        gate = step.require_approval
        flow_step["require_approval"] = (
            gate if isinstance(gate, bool) else gate.model_dump(by_alias=True, exclude_unset=True)
        )
    if step.step_id == entry and not first:
        flow_step["start"] = True
    return flow_step


def _no_fall_through(steps: list[JsonDict], project: Project) -> None:
    """A step goes where depends_on and branches say, never on to the next in the list: `goto: end`
    where the list's next step would otherwise follow it."""
    for position, step in enumerate(steps):
        follower = steps[position + 1] if position + 1 < len(steps) else None
        if follower is None or follower.get("needs"):
            continue
        if "branches" in step and _covers(step, project):
            continue
        step["goto"] = END


def _covers(step: JsonDict, project: Project) -> bool:
    block = project.block(str(step["uses"]))
    if block is None or len(block.spec.outputs) != 1:
        return False
    (spec,) = block.spec.outputs.values()
    return spec.enum is not None and all(enum_text(v) in step["branches"] for v in spec.enum)


def _read_inputs(plan: TaskPlan) -> JsonDict:
    found: JsonDict = {}
    for step in plan.steps:
        for value in step.input_mappings.values():
            if not (isinstance(value, str) and is_template(value)):
                continue
            try:
                paths = references(value)
            except TemplateError:
                continue  # the validator reports it where it is written
            for path in paths:
                if path[0] == "inputs" and len(path) > 1:
                    found.setdefault(path[1], {"type": "any"})
    return found


def _outputs(plan: TaskPlan, project: Project) -> JsonDict:
    found: JsonDict = {}
    for step in plan.steps:
        block = project.block(step.block_id)
        for name in block.spec.outputs if block is not None else []:
            found.setdefault(name, {"optional": True})
    return found


def plan_definition(doc: Document, flow: JsonDict) -> FlowDef:
    """The flow as if it were a file, each position the plan's own (so diagnostics point into the plan)."""
    entry = next((i for i, step in enumerate(flow["steps"]) if step.get("start")), 0)

    def translate(path: JsonPath) -> JsonPath:
        if path[:1] == ("plan_id",):
            return ("flow",)
        if path[:1] == ("user_intent",):
            return ("description",)
        if path[:1] == ("entry_step_id",):
            return ("steps", entry, "start")
        if path[:2] == ("schedule", "cron_expression"):
            return ("schedule", "cron")
        if path[:1] == ("steps",) and len(path) >= 3:
            return (*path[:2], _RENAMED.get(str(path[2]), path[2]), *path[3:])
        return path

    marks = {translate(path): mark for path, mark in doc.marks.items()}
    key_marks = {translate(path): mark for path, mark in doc.key_marks.items()}
    marks[()] = doc.marks.get((), (1, 1))
    spec = FlowSpec.model_validate(flow)
    return Definition(spec, Document(doc.path, doc.display, flow, marks, key_marks))


def _placed(d: Diagnostic, doc: Document) -> Diagnostic:
    """A flow's diagnostic told in the plan's words: `steps[2].block_id: ...`."""
    where = {mark: path for path, mark in doc.key_marks.items()}
    where.update({mark: path for path, mark in doc.marks.items()})
    path = where.get((d.line, d.col))
    message = d.message
    for flow_key, plan_key in _RENAMED_BACK.items():
        message = message.replace(f"`{flow_key}:`", f"`{plan_key}`")
    prefix = plan_path(path) if path else ""
    placed = f"{prefix}: {message}" if prefix and not message.startswith(f"{prefix}: ") else message
    return Diagnostic(d.file, d.line, d.col, d.code, placed, d.severity)


def check_plan(
    doc: Document, project: Project, *, name: str | None = None
) -> tuple[Project, FlowDef, list[Diagnostic]]:
    """The plan's flow, in a copy of the project that holds it, and every problem the validator finds."""
    flow = plan_flow(doc, project, name=name)
    try:
        definition = plan_definition(doc, flow)
    except (
        ValidationError
    ) as exc:  # the plan's schema keeps this from happening; say it in the plan's terms
        raise PlanError(
            [doc.diag((), "BY850", f"the plan does not make a flow: {exc.errors()[0]['msg']}")]
        ) from None
    holding = replace(
        project, flows={**project.flows, definition.spec.flow: definition}, diagnostics=[]
    )
    found = check_flow(holding, definition)
    return holding, definition, sorted({_placed(d, doc) for d in found})


def plan_bundle(doc: Document, project: Project, *, name: str | None = None) -> Bundle:
    """The plan as a pinned bundle, validated; raises PlanError with the plan's diagnostics. The plan
    itself is pinned with it (`plan` in the bundle's source), so a run keeps the plan it ran."""
    holding, definition, problems = check_plan(doc, project, name=name)
    if any(d.severity == "error" for d in problems):
        raise PlanError(problems)
    try:
        bundle = make_bundle(holding, definition.spec.flow)
    except UsageError as exc:
        raise PlanError([doc.diag((), "BY850", str(exc))]) from None
    source = {**bundle.source, "plan": doc.data}
    return replace(bundle, source=source)
