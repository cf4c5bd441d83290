"""A flow's `schedule:`: the cron expression, the time zone and the inputs of scheduled runs.

The cron grammar and the time zone check live in `engine.spec.cron`, which the scheduler uses too: what
validates is what fires.
"""

from __future__ import annotations

from engine.core.diagnostics import did_you_mean
from engine.validate.semantic.index import FlowIndex, quote_list


def check_schedule(index: FlowIndex) -> None:
    flow = index.definition.spec
    schedule = flow.schedule
    if schedule is None:
        return
    # Imported here, not at the top: croniter costs ~10 ms, which yards without schedules don't pay.
    from engine.spec.cron import cron_problem, never_fires_problem, timezone_problem

    problem = cron_problem(schedule.cron)
    if problem is not None:
        index.report(("schedule", "cron"), "BY507", f"schedule: {problem}")
    never = never_fires_problem(schedule.cron)
    if never is not None:
        index.report(("schedule", "cron"), "BY510", f"schedule: {never}")
    zone = timezone_problem(schedule.timezone)
    if zone is not None:
        index.report(("schedule", "timezone"), "BY508", f"schedule: {zone}")
    for name in schedule.inputs:
        if name not in flow.inputs:
            declared = (
                f"its inputs are {quote_list(flow.inputs)}" if flow.inputs else "it has no inputs"
            )
            index.report(
                ("schedule", "inputs", name),
                "BY509",
                f"schedule: '{name}' is not an input of flow '{flow.flow}' ({declared})"
                f"{did_you_mean(name, flow.inputs)}",
                key=True,
            )
    missing = [
        name
        for name, decl in flow.inputs.items()
        if not decl.has_default and name not in schedule.inputs
    ]
    if missing:
        index.report(
            ("schedule",),
            "BY509",
            f"schedule: scheduled runs get no value for the required input"
            f"{'s' if len(missing) > 1 else ''} {quote_list(missing)}: set "
            f"{'it' if len(missing) == 1 else 'them'} in schedule.inputs",
            key=True,
        )
