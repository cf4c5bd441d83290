"""The registry of diagnostic codes: every code `blockyard validate` can report, with a short title.

Codes are a public contract (SARIF rules, docs, editor integrations): once published, a code keeps
its meaning. Ranges: BY0xx reading and YAML, BY1xx JSON Schema, BY201-BY202 yard-wide duplicates
found while loading, BY6xx problems only the server's hot reload reports, BY80x the version policy
against a base revision (`validate --base`); the semantic checks own the rest (engine/validate/semantic/codes.py).
"""

from __future__ import annotations

from functools import cache

from engine.validate.semantic.codes import CODES as SEMANTIC

LOADING: dict[str, str] = {
    "BY001": "file cannot be read (missing, too large, not UTF-8 text)",
    "BY002": "YAML syntax error",
    "BY003": "YAML tag not allowed",
    "BY004": "duplicate mapping key",
    "BY005": "document nested too deeply or expands too much (alias bomb)",
    "BY006": "empty file",
    "BY007": "more than one YAML document in a file",
    "BY008": "symbolic link that resolves outside the yard, dangles or loops (not read)",
    "BY009": "not a regular file (FIFO, device, socket; not read)",
}

SCHEMA: dict[str, str] = {
    "BY100": "value does not match the schema",
    "BY101": "top level is not a mapping",
    "BY102": "unknown key",
    "BY103": "missing required key",
    "BY104": "wrong value type",
    "BY105": "value not among the allowed ones",
    "BY106": "malformed name, duration or other formatted value",
    "BY107": "value out of range, or list or text too short or long",
    "BY108": "definition in the wrong folder (a block among flows or a flow among blocks)",
}

PROJECT: dict[str, str] = {
    "BY201": "block version defined twice",
    "BY202": "flow defined twice",
}

SERVE: dict[str, str] = {
    # Retired, kept so it is never reused: the server no longer checks schedules on its own.
    "BY601": "retired: invalid schedule (validate reports BY507, BY508 and BY510 instead)",
    "BY602": "flow does not compile",
    "BY690": "flow could not be pinned into a bundle",
}

FLOW_TESTS: dict[str, str] = {
    "BY700": "malformed flow test file (`blockyard test`)",
}

# `blockyard validate --base REV` and `blockyard diff` (engine/review/versions.py): what changed since the base
VERSIONS: dict[str, str] = {
    "BY800": "block contract or prompt changed without a new version",
    "BY801": "flow contract changed without a new version",
    "BY802": "step of a flow the change did not update runs a block whose contract broke it",
}

# eval files (`evals/*.yaml`, docs/evals.md: engine/validate/evalfiles.py and evalchecks.py); an eval's
# unknown flow, block, model profile, bad regex or expression take the semantic codes of the same meaning
EVALS: dict[str, str] = {
    "BY880": "eval assertion without exactly one kind",
    "BY881": "eval that names neither or both of a flow and a block",
    "BY882": "eval without cases",
    "BY883": "eval defined twice",
    "BY884": "eval dataset missing, unreadable, outside the yard or of an unknown format",
    "BY885": "eval dataset row that is not a case",
    "BY886": "eval case inputs that do not fit the flow's inputs",
    "BY887": "eval assertion about an output the flow does not have",
    "BY888": "eval json_schema that is not a valid JSON Schema",
    "BY889": "eval case name used twice in one eval",
}

# A TaskPlan (docs/taskplans.md) is checked as the flow it converts to; these are the problems only
# the plan has (its other diagnostics are the flow's codes, placed in the plan).
PLANS: dict[str, str] = {
    "BY850": "TaskPlan that does not match its schema (or is not JSON)",
    "BY851": "TaskPlan entry_step_id that names no step",
    "BY852": "TaskPlan step that nothing leads to (not the entry, no depends_on, no branch)",
    "BY853": "TaskPlan step that both depends on a step and is one of its branches",
}

# The stage of a code: by the code itself, else its first four characters (BY80), else three (BY6)
STAGES: dict[str, str] = {"BY0": "loading", "BY1": "schema", "BY201": "project", "BY202": "project",
                          "BY6": "serve", "BY7": "test", "BY80": "policy", "BY81": "policy", "BY85": "plan",
                          "BY88": "eval"}


@cache
def all_codes() -> dict[str, str]:
    """Every known code -> its title, sorted by code; the semantic registry is merged in when present."""
    merged = {**LOADING, **SCHEMA, **PROJECT, **SERVE, **FLOW_TESTS, **VERSIONS, **PLANS, **EVALS}
    for code, title in SEMANTIC.items():
        # the loader's own codes win: a clash is a bug the registry test reports, not a silent override
        merged.setdefault(code, title)
    return dict(sorted(merged.items()))


def stage(code: str) -> str:
    """Which part of validation reports `code`: loading, schema, project or semantic."""
    for key in (code, code[:4], code[:3]):
        if key in STAGES:
            return STAGES[key]
    return "semantic"


def title(code: str) -> str:
    """The short title of `code`, or '' for a code nobody registered."""
    return all_codes().get(code, "")


def markdown_table() -> str:
    """The table of every code, for docs/reference/codes.md (`python -m engine.reference` writes it)."""
    rows = ["| code | stage | meaning |", "| --- | --- | --- |"]
    rows += [f"| {code} | {stage(code)} | {text} |" for code, text in all_codes().items()]
    return "\n".join(rows) + "\n"
