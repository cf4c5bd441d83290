"""The registry of diagnostic codes: every code `blockyard validate` (and the server's hot reload, and
`blockyard test`) can report, with a short title, and the codes reported as warnings.

Codes are a public contract (SARIF rules, CI annotations, docs, editor integrations): once published, a
code keeps its meaning, and a retired code is never reused. Ranges: BY0xx reading and YAML, BY1xx JSON
Schema, BY201-BY202 yard-wide duplicates found while loading, BY21x names that must resolve, BY3xx the
shape of flows and blocks (steps, graph, routing, block kinds), BY4xx dataflow and templates (BY44x what
the compiler needs to build a step), BY5xx configuration, tools, models and schedules, BY6xx problems
only the server's hot reload reports, BY7xx flow test files, BY80x the version policy against a base
revision (`validate --base`), BY81x the yard's `policy:`, BY85x TaskPlans, BY86x durability and
`retention:`, BY87x budgets, BY88x eval files. docs/reference/codes.md is generated from it
(`python -m engine.reference`).
"""

from __future__ import annotations

from functools import cache

# reading a file and its YAML (engine/definitions/load.py, engine/definitions/files.py)
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

# a document against the published JSON Schemas (engine/definitions/schema.py)
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

# yard-wide duplicates found while loading (engine/definitions/project.py)
PROJECT: dict[str, str] = {
    "BY201": "block version defined twice",
    "BY202": "flow defined twice",
}

# names that must resolve: blocks, steps, flows, inputs, outputs, delegates
REFERENCES: dict[str, str] = {
    "BY210": "unknown block",
    "BY211": "unknown block version",
    "BY212": "unknown step",
    "BY213": "step target outside the current body",
    "BY214": "unknown flow",
    "BY215": "unknown input bound with `with:`",
    "BY216": "unknown output",
    "BY217": "required subflow input not bound",
    "BY218": "unknown delegate",
}

# the shape of flows: steps, graph, routing, delegation
STRUCTURE: dict[str, str] = {
    "BY300": "step has no action",
    "BY301": "step has more than one action",
    "BY302": "duplicate step id",
    "BY303": "reserved step id",
    "BY304": "more than one start step",
    "BY305": "unreachable step",
    "BY306": "dead end: no path reaches the end",
    "BY307": "unbounded cycle",
    "BY308": "conflicting successors",
    "BY309": "invalid needs",
    "BY310": "branches on a step that does not use a decide block",
    "BY311": "branch value not in the decide block's enum",
    "BY312": "decide value without a branch",
    "BY313": "invalid regular expression",
    "BY314": "router rule without exactly one condition",
    "BY315": "router text rule without a value to match",
    "BY316": "on_max_visits without max_visits",
    "BY317": "step key that does not apply to the step's action",
    "BY318": "subflow cycle",
    "BY319": "map without exactly one of uses and steps",
    "BY320": "delegation cycle",
}

# the shape of blocks: what each block kind requires
BLOCKS: dict[str, str] = {
    "BY350": "transform compute does not match the outputs",
    "BY351": "tool block without a tool",
    "BY352": "wait block without a duration",
    "BY353": "decide block without exactly one enum output",
    "BY354": "model block without a user prompt",
    "BY355": "memory block without memory settings",
    "BY356": "block key that does not apply to the block's kind",
    "BY357": "memory used in a flow without a memory scope",
    "BY358": "block without outputs",
    "BY359": "smart block field name DSPy cannot take",
    "BY360": "default that does not match its declared type",
}

# dataflow and templates: what a step reads is written before it, and every template compiles
DATAFLOW: dict[str, str] = {
    "BY400": "template or expression syntax error",
    "BY401": "unknown template variable",
    "BY402": "unknown flow input",
    "BY403": "step reference not available here",
    "BY404": "context key not written upstream",
    "BY405": "block input not bound",
    "BY406": "parallel steps write the same context key",
    "BY407": "unknown template filter or test",
    "BY408": "flow output never written",
    "BY409": "flow output not written on every path",
    "BY410": "template loads another template (include, extends, import)",
    "BY411": "constant expression over a template limit",
    "BY425": "custom event named like an engine event",
    "BY430": "prompt file or included file missing, unreadable or outside the yard",
    "BY431": "include that cannot be resolved (not a constant name, a cycle, too deep)",
    "BY432": "prompt text and prompt file both given",
    "BY433": "`reduce:` on an output that is not a list (append) or an object (merge)",
    "BY434": "accumulated context key also written another way",
    "BY435": "invalid output directory",
}

# What the compiler needs to build a step; these rules were the compiler's alone before it trusted
# the validator (docs/architecture.md, "Where a rule lives").
BUILD: dict[str, str] = {
    "BY440": "delegation nested too deep",
    "BY441": "name offered to an agent both as a tool and as a delegate",
    "BY442": "tool or delegate named final_answer",
    "BY443": "memory_write of a preference without a key",
    "BY444": "memory_write block with no input to store",
    "BY445": "approval that approves on timeout without a default for every field",
    "BY446": "approve_tools names a tool the agent block does not list in tools",
}

# configuration, tools, models and schedules
CONFIG: dict[str, str] = {
    "BY501": "unknown tool",
    "BY502": "unknown model profile",
    "BY503": "model profile without a model name",
    "BY504": "malformed tool import path",
    "BY505": "model setting that does not apply to the provider",
    "BY506": "configured tool shadows a built-in tool",
    "BY507": "invalid cron expression",
    "BY508": "unknown time zone",
    "BY509": "schedule inputs do not match the flow's inputs",
    "BY510": "schedule never fires",
    "BY515": "duration longer than the maximum (ten years)",
    "BY516": "malformed scripted mock reply",
    "BY517": "server.mcp_flows names an unknown flow",
    "BY518": "notify URL the server may not post to (not http(s), or its host not in http.allowed_hosts)",
    "BY519": "notify names an unknown flow",
}

# problems only the server's hot reload reports (engine/serve/catalog.py)
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

# `policy:` in blockyard.yaml (engine/validate/semantic/policy.py)
POLICY: dict[str, str] = {
    "BY810": "model provider not allowed by the yard's policy",
    "BY811": "model name not allowed by the yard's policy",
    "BY812": "agent turns above the policy's cap",
    "BY813": "loop iterations or step visits above the policy's cap",
    "BY814": "tool the policy keeps behind approval run without an approval gate",
    "BY815": "approval gate without a timeout where the policy requires one",
    "BY816": "http_request host not allowed by the yard's policy",
    "BY817": "flow without a budget where the yard's policy requires one",
}

# A TaskPlan (docs/taskplans.md) is checked as the flow it converts to; these are the problems only
# the plan has (its other diagnostics are the flow's codes, placed in the plan).
PLANS: dict[str, str] = {
    "BY850": "TaskPlan that does not match its schema (or is not JSON)",
    "BY851": "TaskPlan entry_step_id that names no step",
    "BY852": "TaskPlan step that nothing leads to (not the entry, no depends_on, no branch)",
    "BY853": "TaskPlan step that both depends on a step and is one of its branches",
}

# a flow's durability and the runs it must support (engine/validate/semantic/durability.py)
DURABILITY: dict[str, str] = {
    "BY860": "flow with durability none that pauses at an approval gate",
    "BY861": "flow that pauses at an approval gate under blockyard.yaml's durability none",
    "BY862": "trace: false on a flow whose durability keeps checkpoints",
}

# `retention:` in blockyard.yaml (engine/validate/semantic/retention.py)
RETENTION: dict[str, str] = {
    "BY865": "retention age under one hour",
    "BY866": "retention keeps traces longer than the runs they belong to",
}

# a flow's `budget:` against the most its runs can spend (engine/validate/semantic/budgets.py)
BUDGETS: dict[str, str] = {
    "BY870": "budget a run of the flow can pass: its worst case is above a limit",
    "BY871": "budget on a flow whose model calls have no bound",
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

GROUPS: tuple[dict[str, str], ...] = (
    LOADING,
    SCHEMA,
    PROJECT,
    REFERENCES,
    STRUCTURE,
    BLOCKS,
    DATAFLOW,
    BUILD,
    CONFIG,
    SERVE,
    FLOW_TESTS,
    VERSIONS,
    POLICY,
    PLANS,
    DURABILITY,
    RETENTION,
    BUDGETS,
    EVALS,
)

# what the semantic checks (engine/validate/semantic/) report: every one has an example among
# tests/examples/invalid (tests/validate/test_semantic_yard.py)
SEMANTIC: dict[str, str] = {
    **REFERENCES,
    **STRUCTURE,
    **BLOCKS,
    **DATAFLOW,
    **BUILD,
    **CONFIG,
    **POLICY,
    **DURABILITY,
    **RETENTION,
    **BUDGETS,
}

WARNINGS: frozenset[str] = frozenset(
    {"BY312", "BY316", "BY409", "BY505", "BY506", "BY870", "BY871"}
)
"""Codes reported as warnings (validate still exits 0); every other code is an error."""

# The stage of a code: by the code itself, else its first four characters (BY80), else three (BY6)
STAGES: dict[str, str] = {
    "BY0": "loading",
    "BY1": "schema",
    "BY201": "project",
    "BY202": "project",
    "BY6": "serve",
    "BY7": "test",
    "BY80": "policy",
    "BY81": "policy",
    "BY85": "plan",
    "BY88": "eval",
}


@cache
def all_codes() -> dict[str, str]:
    """Every known code -> its title, sorted by code (a code in two groups is a bug the registry's test
    reports: tests/validate/test_codes_registry.py)."""
    return dict(sorted((code, title) for group in GROUPS for code, title in group.items()))


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
