"""Codes of the semantic checks (docs/flows.md, Validation codes), each with a short title.

Codes are a public contract (CI annotations, SARIF rules, docs): once published a code keeps its
meaning, and a retired code is never reused. Ranges: BY21x names that must resolve, BY3xx the
shape of flows and blocks (steps, graph, routing, block kinds), BY4xx dataflow and templates
(BY44x what the compiler needs to build a step), BY5xx configuration, tools, models and
schedules, BY81x the yard's `policy:`, BY86x durability and `retention:`, BY87x budgets. BY201/BY202
belong to the loader; the version policy's BY80x are in engine/validate/codes.py.
"""

from __future__ import annotations

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
}

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

CODES: dict[str, str] = {**REFERENCES, **STRUCTURE, **BLOCKS, **DATAFLOW, **BUILD, **CONFIG, **POLICY,
                         **DURABILITY, **RETENTION, **BUDGETS}

WARNINGS: frozenset[str] = frozenset({"BY312", "BY316", "BY409", "BY505", "BY506", "BY870", "BY871"})
"""Codes reported as warnings (validate still exits 0); every other code is an error."""
