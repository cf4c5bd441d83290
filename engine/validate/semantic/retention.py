"""`retention:` in blockyard.yaml (docs/runtime.md, "Retention"): ages that surely are mistakes.

`gc` deletes what is older than these ages, for good: an age under an hour (`30m` is thirty minutes,
not thirty months) would delete the runs people are still looking at, and traces kept longer than
their runs are deleted with them all the same.
"""

from __future__ import annotations

from engine.core.diagnostics import Diagnostic
from engine.definitions.project import Project
from engine.spec.common import duration_seconds
from engine.validate.semantic.index import issue

MIN_AGE = 3600.0  # one hour


def check_retention(project: Project) -> list[Diagnostic]:
    doc = project.config_doc
    if doc is None:
        return []
    spec = project.config.retention
    found: list[Diagnostic] = []
    ages: dict[str, float] = {}
    for key in ("traces", "runs", "failed"):
        text = getattr(spec, key)
        if text is None:
            continue
        try:
            ages[key] = duration_seconds(text)
        except ValueError:
            continue  # malformed: the schema said so already
        if ages[key] < MIN_AGE:
            found.append(
                issue(
                    doc,
                    ("retention", key),
                    "BY865",
                    f"retention.{key}: '{text}' deletes runs after less than an hour"
                    + (" (m is minutes; write 30d for days)" if text.endswith("m") else "")
                    + "; the shortest age is 1h",
                )
            )
    if "traces" in ages and "runs" in ages and ages["traces"] > ages["runs"]:
        found.append(
            issue(
                doc,
                ("retention", "traces"),
                "BY866",
                f"retention.traces ({spec.traces}) is longer than retention.runs ({spec.runs}): a "
                "run's trace is deleted with the run; make traces shorter or drop it",
            )
        )
    return found
