"""What `blockyard validate` checks in eval files beyond their schema (docs/evals.md, docs/validation.md).

Names resolve (the flow or block evaluated: BY214, BY210, BY211; a judge's model profile: BY502), each
assertion has exactly one kind (BY880) and looks at an output the flow has (BY887), regexes compile in
RE2 (BY313), expressions parse and read only what they are given (BY400, BY401), JSON Schemas are valid
(BY888), and every case's inputs — and its history's turns — fit the flow's inputs (BY886), each
reported where the case was written: the eval file, or the dataset's row. Imports no LangGraph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.core.diagnostics import Diagnostic, did_you_mean
from engine.core.values import JsonDict
from engine.definitions.load import JsonPath
from engine.definitions.project import Project
from engine.spec.common import TypeSpec
from engine.spec.evals import ASSERTION_KINDS, Assertion
from engine.spec.typecheck import InputError, coerce_inputs
from engine.templates.render import check_syntax, references
from engine.validate.evalfiles import EvalDef, EvalFiles, Spot, load_evals, typed_inputs
from engine.validate.semantic.config import known_profiles
from engine.validate.semantic.references import unloaded
from engine.validate.semantic.routing import regex_problem

# what an `expr` assertion sees (engine/evals/assertions.py builds it)
EXPR_NAMES = ("outputs", "inputs", "expected", "usage")


@dataclass(frozen=True)
class Target:
    """What an eval runs, as the checks need it: its inputs and the names of its outputs."""

    inputs: Mapping[str, TypeSpec]
    outputs: tuple[str, ...]


def check_yard_evals(project: Project) -> list[Diagnostic]:
    """Every problem of the yard's eval files (reading them, their datasets, and the checks below); the
    files read are added to `project.files` (what `validate` counts as checked)."""
    files = load_evals(project)
    project.files.extend(files.files)
    return [*files.diagnostics, *check_evals(project, files)]


def check_evals(project: Project, files: EvalFiles) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for definition in files.evals.values():
        found.extend(check_eval(project, definition))
    return sorted(set(found))


def target_of(
    project: Project, definition: EvalDef, found: list[Diagnostic] | None = None
) -> Target | None:
    """The flow or block an eval runs; None (with its problem in `found`) when it names none that loaded."""
    spec, doc = definition.spec, definition.doc
    problems = found if found is not None else []
    if (spec.flow is None) == (spec.block is None):
        both = spec.flow is not None
        problems.append(
            doc.diag(
                ("block",) if both else ("eval",),
                "BY881",
                f"eval '{spec.name}' names {'both a flow and a block' if both else 'no flow'}: "
                "give exactly one of `flow:` and `block:`",
            )
        )
        return None
    if spec.flow is not None:
        flow = project.flow(spec.flow)
        if flow is None:
            broken = unloaded(project, project.config.paths.flows, spec.flow)
            problems.append(
                doc.diag(
                    ("flow",),
                    "BY214",
                    f"eval '{spec.name}' evaluates flow '{spec.flow}', which did "
                    f"not load: fix the problems reported in {broken}"
                    if broken is not None
                    else f"eval '{spec.name}' evaluates unknown flow "
                    f"'{spec.flow}'{did_you_mean(spec.flow, project.flows)}",
                )
            )
            return None
        return Target(flow.spec.inputs, tuple(flow.spec.outputs))
    ref = str(spec.block)
    block = project.block(ref)
    if block is None:
        name, _, version = ref.partition("@")
        versions = project.blocks.get(name)
        if versions:
            problems.append(
                doc.diag(
                    ("block",),
                    "BY211",
                    f"eval '{spec.name}' evaluates block '{name}' version "
                    f"{version}, which does not exist (versions: "
                    f"{', '.join(str(v) for v in sorted(versions))})",
                )
            )
        elif (broken := unloaded(project, project.config.paths.blocks, name)) is not None:
            problems.append(
                doc.diag(
                    ("block",),
                    "BY210",
                    f"eval '{spec.name}' evaluates block '{name}', which did "
                    f"not load: fix the problems reported in {broken}",
                )
            )
        else:
            problems.append(
                doc.diag(
                    ("block",),
                    "BY210",
                    f"eval '{spec.name}' evaluates unknown block "
                    f"'{name}'{did_you_mean(name, project.blocks)}",
                )
            )
        return None
    return Target(block.spec.inputs, tuple(block.spec.outputs))


def check_eval(project: Project, definition: EvalDef) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    spec, doc = definition.spec, definition.doc
    target = target_of(project, definition, found)
    if not spec.cases and spec.dataset is None:
        found.append(
            doc.diag(
                ("eval",), "BY882", f"eval '{spec.name}' has no cases: add `cases:` or a `dataset:`"
            )
        )
    elif not definition.cases and definition.dataset is not None:
        # read, and empty (or every row broken)
        found.append(
            doc.diag(
                ("dataset",),
                "BY882",
                f"eval '{spec.name}': dataset '{spec.dataset}' holds no cases",
            )
        )
    profiles = known_profiles(project)
    top = Spot(doc.display, doc)
    for position, assertion in enumerate(spec.assert_):
        found.extend(check_assertion(assertion, top, ("assert", position), target, profiles))
    seen: dict[str, str] = {}
    for loaded in definition.cases:
        spot = loaded.spot
        if loaded.name in seen:
            found.append(
                spot.diag(
                    ("name",) if loaded.case.name else (),
                    "BY889",
                    f"eval '{spec.name}': case '{loaded.name}' is also written at {seen[loaded.name]}; "
                    "a case's name must be unique (reports compare cases by name)",
                )
            )
        else:
            seen[loaded.name] = spot.where
        for position, assertion in enumerate(loaded.case.assert_):
            found.extend(check_assertion(assertion, spot, ("assert", position), target, profiles))
        if target is None:
            continue
        found.extend(
            _inputs_problem(
                target,
                typed_inputs(loaded, target.inputs),
                spot,
                ("inputs",),
                f"case '{loaded.name}'",
            )
        )
        for turn, said in enumerate(loaded.case.history):
            inputs = said if isinstance(said, dict) else {"message": said}
            found.extend(
                _inputs_problem(
                    target,
                    inputs,
                    spot,
                    ("history", turn),
                    f"case '{loaded.name}', history turn {turn + 1}",
                )
            )
    return found


def _inputs_problem(
    target: Target, inputs: JsonDict, spot: Spot, path: JsonPath, what: str
) -> list[Diagnostic]:
    try:
        coerce_inputs(target.inputs, inputs, where=what)
    except InputError as exc:
        return [spot.diag(path, "BY886", str(exc))]
    return []


def check_assertion(
    assertion: Assertion, spot: Spot, path: JsonPath, target: Target | None, profiles: list[str]
) -> list[Diagnostic]:
    """The problems of one assertion written at `path` of `spot`."""
    kinds = assertion.kinds
    if len(kinds) != 1:
        return [
            spot.diag(
                path,
                "BY880",
                "an assertion has exactly one kind ("
                f"{', '.join(ASSERTION_KINDS)}); this one has "
                f"{'none' if not kinds else ', '.join(kinds)}",
            )
        ]
    found: list[Diagnostic] = []
    if (
        target is not None
        and assertion.output is not None
        and assertion.output not in target.outputs
    ):
        found.append(
            spot.diag(
                (*path, "output"),
                "BY887",
                f"assertion about output '{assertion.output}', which the flow does not have"
                f"{did_you_mean(assertion.output, target.outputs)} (its outputs: "
                f"{', '.join(target.outputs) or 'none'})",
            )
        )
    kind = kinds[0]
    if kind == "regex" and assertion.regex is not None:
        problem = regex_problem(assertion.regex)
        if problem is not None:
            found.append(
                spot.diag(
                    (*path, "regex"),
                    "BY313",
                    f"regex '{assertion.regex}' does not compile: {problem}",
                )
            )
    elif kind == "expr" and assertion.expr is not None:
        found.extend(_expr_problems(assertion.expr, spot, (*path, "expr")))
    elif kind == "json_schema" and assertion.json_schema is not None:
        problem = schema_problem(assertion.json_schema)
        if problem is not None:
            found.append(
                spot.diag((*path, "json_schema"), "BY888", f"not a valid JSON Schema: {problem}")
            )
    elif kind == "judge" and assertion.judge is not None:
        model = assertion.judge.model
        if model is not None and model not in profiles:
            found.append(
                spot.diag(
                    (*path, "judge", "model"),
                    "BY502",
                    f"judge: unknown model profile '{model}'{did_you_mean(model, profiles)} "
                    f"(profiles: {', '.join(profiles)})",
                )
            )
    return found


def _expr_problems(expression: str, spot: Spot, path: JsonPath) -> list[Diagnostic]:
    problem = check_syntax(expression, expression=True)
    if problem is not None:
        return [spot.diag(path, "BY400", f"expr '{expression}': {problem}")]
    unknown = sorted(
        {
            chain[0]
            for chain in references(expression, expression=True)
            if chain[0] not in EXPR_NAMES
        }
    )
    return [
        spot.diag(
            path,
            "BY401",
            f"expr '{expression}' reads '{name}'{did_you_mean(name, EXPR_NAMES)}; an "
            f"eval's expression sees {', '.join(EXPR_NAMES)}",
        )
        for name in unknown
    ]


def schema_problem(candidate: JsonDict) -> str | None:
    """None when `candidate` is a valid JSON Schema (draft 2020-12), else why not."""
    # jsonschema costs ~40 ms to import: only an eval with a json_schema assertion loads it
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(candidate)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return f"{exc.message}{f' (at {where})' if where else ''}"
    return None
