"""docs/reference/codes.md: every diagnostic code, from the code registry (engine/validate/codes.py)."""

from __future__ import annotations

from engine.reference.markdown import header
from engine.validate.codes import markdown_table

INTRO = (
    "Every code `blockyard validate` (and `blockyard test`, `validate --base`, the server's reload, TaskPlan "
    "checks) can report, with the stage that reports it. Codes are stable: a code keeps its meaning once "
    "published. What is checked in which order and the output formats: [validation.md](../validation.md); "
    "the semantic rules with examples: [flows.md](../flows.md#validation-codes-semantic)."
)


def page() -> str:
    lines = header("Diagnostic code reference", "engine/validate/codes.py", INTRO)
    return "\n".join(lines) + markdown_table()
