"""A flow's `schedule:`: the cron expression, the time zone and the inputs of scheduled runs."""

from __future__ import annotations

import re
from functools import lru_cache

from engine.diagnostics import did_you_mean
from engine.validate.semantic.index import FlowIndex, quote_list

MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
MONTHS = {name: number for number, name in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
DAYS = {name: number for number, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)
_NTH_WEEKDAY = re.compile(r"^(?P<day>\w+)(#[1-5]|L)$")  # 5#3: third Friday; 5L: last Friday


def check_schedule(index: FlowIndex) -> None:
    flow = index.definition.spec
    schedule = flow.schedule
    if schedule is None:
        return
    problem = cron_problem(schedule.cron)
    if problem is not None:
        index.report(("schedule", "cron"), "BY507", f"schedule: {problem}")
    if not known_timezone(schedule.timezone):
        index.report(("schedule", "timezone"), "BY508",
                     f"schedule: unknown time zone '{schedule.timezone}' (use an IANA name such as "
                     "Europe/Paris, America/New_York or UTC)")
    for name in schedule.inputs:
        if name not in flow.inputs:
            declared = f"its inputs are {quote_list(flow.inputs)}" if flow.inputs else "it has no inputs"
            index.report(("schedule", "inputs", name), "BY509",
                         f"schedule: '{name}' is not an input of flow '{flow.flow}' ({declared})"
                         f"{did_you_mean(name, flow.inputs)}", key=True)
    missing = [name for name, decl in flow.inputs.items() if not decl.has_default and name not in schedule.inputs]
    if missing:
        index.report(("schedule",), "BY509",
                     f"schedule: scheduled runs get no value for the required input"
                     f"{'s' if len(missing) > 1 else ''} {quote_list(missing)}: set "
                     f"{'it' if len(missing) == 1 else 'them'} in schedule.inputs", key=True)


@lru_cache(maxsize=256)
def known_timezone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a five-field cron expression (or a macro such as @daily), or None."""
    text = expression.strip()
    if text.lower() in MACROS:
        return None
    parts = text.split()
    if len(parts) != 5:
        return (f"cron '{expression}' has {len(parts)} field{'s' if len(parts) != 1 else ''}; use five "
                "(minute hour day-of-month month day-of-week, e.g. '0 11 * * TUE') or a macro such as @daily")
    for part, (name, low, high, names) in zip(parts, FIELDS, strict=True):
        for item in part.split(","):
            problem = _item_problem(item, name, low, high, names)
            if problem is not None:
                return f"cron '{expression}': {name} '{part}' {problem}"
    return None


def _digits(text: str) -> bool:
    """ASCII digits only: '²'.isdigit() is true, but int('²') fails."""
    return text.isascii() and text.isdigit()


def _item_problem(item: str, name: str, low: int, high: int, names: dict[str, int]) -> str | None:
    if not item:
        return "has an empty list entry"
    base, slash, step = item.partition("/")
    if slash and (not _digits(step) or len(step) > 9 or int(step) == 0):
        return f"has an invalid step '/{step}'"
    if base in ("*", "?") or (base == "L" and name == "day of month"):
        return None
    if name == "day of week":
        special = _NTH_WEEKDAY.match(base)
        if special is not None:
            base = special.group("day")
    start, dash, end = base.partition("-")
    values = []
    for token in (start, end) if dash else (start,):
        if _digits(token) and len(token) > 9:  # int() of thousands of digits is refused, and pointless
            return f"has '{token[:12]}...', outside {low}-{high}"
        value = int(token) if _digits(token) else names.get(token.lower())
        if value is None:
            return f"has '{token}', which is not a number{' or a name' if names else ''}"
        if not low <= value <= high:
            return f"has {value}, outside {low}-{high}"
        values.append(value)
    if len(values) == 2 and values[0] > values[1]:
        return f"has the range {start}-{end}, which runs backwards"
    return None
