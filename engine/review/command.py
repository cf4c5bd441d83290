"""`blockyard diff` and `blockyard validate --base`: load both sides, compare, report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.definitions.project import Project
from engine.review.changes import YardDiff
from engine.review.compare import Loaded, compare
from engine.review.graphs import add_graphs
from engine.review.inflight import StateSource, in_flight
from engine.review.revisions import Side, sides
from engine.review.versions import load_side, version_problems


@dataclass
class Outcome:
    diff: YardDiff
    base: Project
    head: Project
    warnings: list[str]


def diff_yard(
    yard: Path, base: str | None, head: str | None, *, draw: bool, state: StateSource | None = None
) -> Outcome:
    """The semantic diff of the yard at `yard` between BASE and HEAD (docs/review.md); with `state`
    (the state database or a server), what the change means for its paused runs, schedules and threads."""
    with sides(yard, base, head) as (old, new):
        before, after = load_side(old), load_side(new)
        found = compare(Loaded(old.label, before), Loaded(new.label, after))
        add_graphs(found, before, after, draw=draw)
        found.problems = version_problems(found, after)
        if state is not None:
            found.inflight = in_flight(found, before, after, state)
        warnings = [
            _broken(side, project)
            for side, project in ((old, before), (new, after))
            if not project.ok
        ]
        return Outcome(found, before, after, warnings)


def _broken(side: Side, project: Project) -> str:
    errors = [d for d in project.diagnostics if d.severity == "error"]
    first = errors[0].format()
    return (
        f"the {side.label} side has {len(errors)} loading error{'s' if len(errors) != 1 else ''} "
        f"(first: {first}); what does not load is left out of the diff"
    )
