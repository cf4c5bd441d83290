"""Drafting a flow from an intent (`blockyard compose`, docs/compose.md).

A model is asked, with structured output, for a TaskPlan (the schema of engine/spec/interchange.py)
that uses the blocks of the yard's catalog (name, description, category, tags, kind, inputs and
outputs). The plan is checked like `blockyard run --plan` checks one (`check_plan`); while it has
errors, the model sees its plan and the diagnostics and is asked to repair it, at most `ROUNDS`
times in all. The model is handed in (a `StructuredModel`: the CLI resolves the yard's profile),
so this module imports no provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError, ValidationFailed
from engine.core.values import JsonDict
from engine.definitions.load import Document
from engine.definitions.project import Project, is_builtin
from engine.interchange.blocks import slug
from engine.interchange.taskplan import PlanError, check_plan, read_plan
from engine.models.base import StructuredModel, StructuredRequest
from engine.spec.block import MEMORY_KINDS
from engine.spec.interchange import TaskPlan
from engine.validate.semantic.blocks import prompt_memory_names

ROUNDS = 3
NAME_WORDS = 5  # a flow named from the intent takes its first words
PLAN_DISPLAY = "plan"

SYSTEM = """You turn a user's intent into a TaskPlan for Blockyard: a JSON object that runs blocks of the
yard's catalog, and nothing else. Rules:
- every step's block_id is a block of the catalog; step_id is unique (letters, digits, _ and -);
- entry_step_id names the first step; every other step depends_on an earlier step, or is named in the
  `branches` of a decide block (its outcome -> step id or `end`);
- input_mappings give each required input of a block (block input -> a literal, or a template such as
  "{{ context.OUTPUT }}" for an output of an earlier step, or "{{ inputs.NAME }}" for an input of the
  flow, declared under `inputs` with a type and, for a scheduled plan, a default);
- a schedule in the intent ("every Tuesday at 1pm") is `schedule`: {cron_expression, timezone,
  human_readable, inputs}; `schedule.inputs` gives every input without a default a value;
- blocks marked needs_memory (memory_read and memory_write blocks, prompts that read what was
  remembered) need the plan's `memory`: {scope: a template over the plan's inputs, such as
  "users/{{ inputs.user_id }}"}; what one run saves, the later runs with the same scope read;
- to ask a person (a value to fill in, a confirmation), give a step `require_approval`:
  {message, fields}; the fields' values land in the context.
Use as few steps as the intent needs."""


@dataclass(frozen=True)
class Round:
    """One answer of the model and what the validator says of it."""

    plan: JsonDict
    problems: list[Diagnostic]

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.problems if d.severity == "error"]


@dataclass(frozen=True)
class Composed:
    """The plan that validated (its document, for `run --plan`'s path), and every round it took."""

    doc: Document
    rounds: list[Round]

    @property
    def plan(self) -> JsonDict:
        return self.rounds[-1].plan


class ComposeFailed(ValidationFailed):
    """The model's plan still has errors after the last round (exit 1, nothing written)."""

    code = "compose_failed"
    http_status = 422

    def __init__(self, rounds: list[Round]) -> None:
        super().__init__(rounds[-1].errors)
        self.rounds = rounds
        last = self.diagnostics
        lines = [
            f"error: the model's plan still has {len(last)} problem{'s' if len(last) != 1 else ''} after "
            f"{len(rounds)} round{'s' if len(rounds) != 1 else ''}; nothing was written:"
        ]
        lines += [f"error: {problem_text(d)}" for d in last]
        self.args = ("\n".join(lines),)  # the CLI prints it as it is (each line says "error")


def problem_text(d: Diagnostic) -> str:
    """A diagnostic of a plan as the model (and the user) reads it: `BY210 steps[2].block_id: ...`."""
    return f"{d.code} {d.message}"


def flow_name(intent: str) -> str:
    """The flow's name when none is given: the intent's first words (`order my lunch every Tuesday ...`
    -> `order_my_lunch_every_tuesday`)."""
    return slug(" ".join(intent.split()[:NAME_WORDS]), "composed")


def catalog(project: Project) -> list[JsonDict]:
    """What the model chooses from: the newest version of every block of the yard, the built-in
    memory blocks included. A block that needs a memory scope (a memory block, a prompt that reads
    memory: the rule of BY357) says so with `needs_memory`: the plan gives the scope, `memory`."""
    entries = []
    for name in sorted(project.blocks):
        versions = project.blocks[name]
        newest = versions[max(versions)]
        spec = newest.spec
        entry: JsonDict = {
            "block": name,
            "kind": spec.kind,
            "description": " ".join((spec.description or "").split()),
            "category": spec.category,
            "tags": list(spec.tags),
            "inputs": {
                key: {
                    **_contract(value.model_dump(exclude_defaults=True, by_alias=True)),
                    "required": not value.has_default,
                }
                for key, value in spec.inputs.items()
            },
            "outputs": {
                key: _contract(value.model_dump(exclude_defaults=True, by_alias=True))
                for key, value in spec.outputs.items()
            },
        }
        if spec.kind in MEMORY_KINDS or prompt_memory_names(newest, project):
            entry["needs_memory"] = True
        entries.append(entry)
    return entries


def own_blocks(project: Project) -> bool:
    """Whether the yard has blocks of its own (the built-in memory blocks alone make no flow)."""
    return any(not is_builtin(versions[max(versions)]) for versions in project.blocks.values())


def _contract(spec: JsonDict) -> JsonDict:
    return {"type": "any", **spec}


def plan_schema() -> JsonDict:
    return TaskPlan.model_json_schema()


def request(intent: str, entries: list[JsonDict], previous: Round | None) -> StructuredRequest:
    """The model's request; a repair round adds the previous plan and its problems."""
    inputs: JsonDict = {"intent": intent, "catalog": entries}
    user = (
        f"Intent: {intent}\n\nThe catalog of blocks (JSON):\n{json.dumps(entries, ensure_ascii=False)}\n\n"
        "Reply with the TaskPlan."
    )
    if previous is not None:
        problems = [problem_text(d) for d in previous.errors]
        inputs.update(previous_plan=previous.plan, problems=problems)
        user += (
            "\n\nYour previous plan does not validate:\n"
            f"{json.dumps(previous.plan, ensure_ascii=False, indent=2)}\n\nIts problems:\n"
            + "\n".join(f"- {p}" for p in problems)
            + "\n\nReply with the whole plan, repaired."
        )
    return StructuredRequest(
        flow="compose",
        step="plan",
        block="compose",
        system=SYSTEM,
        user=user,
        output_schema=plan_schema(),
        inputs=inputs,
        purpose="compose",
    )


def plan_document(plan: JsonDict) -> Document:
    """The plan as a JSON document with positions, as if read from a file (diagnostics place into it)."""
    return read_plan(json.dumps(plan, indent=2, ensure_ascii=False).encode(), PLAN_DISPLAY)


def judge(plan: JsonDict, project: Project, name: str) -> tuple[Document, list[Diagnostic]]:
    doc = plan_document(plan)
    try:
        _holding, _definition, problems = check_plan(doc, project, name=name)
    except (
        PlanError
    ) as exc:  # what only a plan gets wrong (BY850-BY853) stops before the flow's checks
        return doc, list(exc.diagnostics)
    return doc, problems


async def compose(
    project: Project,
    intent: str,
    model: StructuredModel,
    *,
    name: str,
    rounds: int = ROUNDS,
    on_round: Callable[[Round, int], None] | None = None,
) -> Composed:
    """Ask `model` for a plan of `intent` until one validates (at most `rounds` answers); raises
    ComposeFailed with every round when none does."""
    if not intent.strip():
        raise UsageError("the intent is empty: say what the flow should do")
    entries = catalog(project)
    if not own_blocks(project):
        raise UsageError(
            f"the yard has no blocks to compose a flow from (in {project.config.paths.blocks}/)"
        )
    done: list[Round] = []
    for number in range(1, rounds + 1):
        plan = await model.structured(request(intent, entries, done[-1] if done else None))
        doc, problems = judge(plan, project, name)
        done.append(Round(plan, problems))
        if on_round is not None:
            on_round(done[-1], number)
        if not done[-1].errors:
            return Composed(doc, done)
    raise ComposeFailed(done)
