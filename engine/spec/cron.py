"""Cron schedules of flows: the one grammar, and the fire times computed from it.

`blockyard validate`, `blockyard schedules`, the server's scheduler and its catalog all ask this
module, so what validates is exactly what fires. croniter does the calendar arithmetic; this
module decides which of croniter's syntax a flow may use (docs/flows.md, "Schedules"):

- five fields (minute hour day-of-month month day-of-week), or a macro such as `@daily`;
- `*`, values, ranges, steps and lists; names JAN-DEC and SUN-SAT; 0 and 7 are Sunday;
- `L` (last day) in the day of month; `?` (any) in the day of month or day of week;
- `5#3` (third Friday) and `5L` or `L5` (last Friday) in the day of week, when the day of month
  is `*` or `?`.

Refused, each with the reason: a seconds or years field (schedules fire at most once a minute);
croniter's `R` (random) and `H` (hashed) values, whose fire times change from one reading to the
next; `W` (nearest weekday), which croniter fires on days the expression does not name; a range
that runs backwards or names a single value (croniter reads `5-5` as every value); and `#` or
`L` in the day of week next to a day of month (croniter then requires both, cron means either).

An expression that no date matches (`0 0 30 2 *`) never fires: the search is bounded to
`LOOKAHEAD_YEARS`, and the scheduler uses the same bound, so it agrees with the validator.
"""

from __future__ import annotations

import platform
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.spec.flow import ScheduleSpec


@contextmanager
def _no_file_probe() -> Iterator[None]:
    """croniter's import asks `platform.architecture()` whether Python is 32-bit, and that runs the
    `file` program on the interpreter: a process started for every `blockyard validate` of a yard with
    a schedule (~10 ms of its ~0.3 s). croniter also asks the pointer size, which says the same for
    the running interpreter, so meanwhile `architecture` answers from it without the process."""
    asked = platform.architecture

    def pointer_size(*args: object, **kwargs: object) -> tuple[str, str]:
        return f"{struct.calcsize('P') * 8}bit", ""

    platform.architecture = pointer_size
    try:
        yield
    finally:
        platform.architecture = asked


with _no_file_probe():
    from croniter import CroniterBadDateError, CroniterError, croniter

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELDS = ("minute", "hour", "day of month", "month", "day of week")
# What each field takes, for the message that names a field croniter refused.
TAKES = (
    "0-59",
    "0-23",
    "1-31 or L for the last day",
    "1-12 or JAN-DEC",
    "0-7 or SUN-SAT (0 and 7 are Sunday), 5#3 for the third Friday or 5L for the last",
)
NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {
        name: number
        for number, name in enumerate(
            ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
            start=1,
        )
    },
    {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))},
)
DAY_OF_MONTH, DAY_OF_WEEK = 2, 4
# The longest gap between two fire times of an accepted expression is 40 years (February 29th on
# a given weekday, e.g. `0 0 * 2 5#5`); an expression with no fire time in 50 years has none at all.
LOOKAHEAD_YEARS = 50

_FIELD = re.compile(r"\S+", re.ASCII)  # croniter's own field splitter: no Unicode spaces
_LAST_WEEKDAY = re.compile(r"^(?P<day>\d)l$")  # 5L: croniter spells the last Friday L5
_RANGE = re.compile(r"^(?P<low>[^-/]+)-(?P<high>[^-/]+)(/\d+)?$")
_REASONS = (  # croniter's message -> ours
    ("out of range", "out of range"),
    ("out of bands", "out of range"),
    ("step", "a step must be 1 or more"),
    ("mixing literal values and nth", "'#' and 'L' days can't be listed with plain days"),
    ("Question mark", "'?' is only for the day of month and the day of week"),
    ("Invalid day_of_week value", "'#' takes 1-5"),
)


class CronError(ValueError):
    """A cron expression outside the grammar; the message says why."""


def croniter_fields(expression: str) -> list[str]:
    """The five fields croniter is given: macros spelled out, the last weekday in croniter's spelling.

    Raises CronError when `expression` is outside the grammar.
    """
    problem = cron_problem(expression)
    if problem is not None:
        raise CronError(problem)
    return _normalized(expression)


@lru_cache(maxsize=512)
def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a cron expression a flow may use (BY507), or None."""
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() in MACROS:
            return None
        return f"cron '{expression}': unknown macro '{text}'; use one of {', '.join(MACROS)}"
    parts = _FIELD.findall(text)
    if len(parts) != 5:
        why = {
            6: " (a sixth field would be seconds: schedules fire at most once a minute)",
            7: " (seconds and years fields are not supported: schedules fire at most once a minute)",
        }
        return (
            f"cron '{expression}' has {len(parts)} field{'' if len(parts) == 1 else 's'}; use five "
            f"(minute hour day-of-month month day-of-week, e.g. '0 11 * * TUE') or a macro such as "
            f"@daily{why.get(len(parts), '')}"
        )
    normalized = _normalized(expression)
    for index, (part, given) in enumerate(zip(parts, normalized, strict=True)):
        problem = _field_problem(index, part, given)
        if problem is not None:
            return f"cron '{expression}': {FIELDS[index]} '{part}' {problem}"
    special = [
        item for item in normalized[DAY_OF_WEEK].split(",") if "#" in item or item.startswith("l")
    ]
    if special and normalized[DAY_OF_MONTH] not in ("*", "?"):
        return (
            f"cron '{expression}': day of week '{parts[DAY_OF_WEEK]}' uses '#' or 'L', which can't be "
            f"combined with a day of month ('{parts[DAY_OF_MONTH]}'): set the day of month to '*'"
        )
    try:
        croniter.expand(" ".join(normalized))
    except CroniterError as exc:  # a combination the fields alone did not show
        reason = _reason(exc)
        return (
            f"cron '{expression}' is not a valid cron expression{': ' + reason if reason else ''}"
        )
    return None


def _normalized(expression: str) -> list[str]:
    text = expression.strip().lower()
    parts = _FIELD.findall(MACROS.get(text, text))
    if len(parts) == 5:
        parts[DAY_OF_WEEK] = ",".join(
            _LAST_WEEKDAY.sub(r"l\g<day>", item) for item in parts[DAY_OF_WEEK].split(",")
        )
    return parts


def _field_problem(index: int, part: str, given: str) -> str | None:
    """Why one field is refused, or None; `given` is the field as croniter will read it."""
    items = given.split(",")
    if any(not item for item in items):
        return "has an empty list entry"
    if any(item[0] in "hr" for item in items):
        return (
            "uses a random ('R') or hashed ('H') value, which is not supported: a schedule must fire at "
            "the same times every time it is read"
        )
    if "w" in given and index == DAY_OF_MONTH:
        return (
            "uses 'W' (nearest weekday), which is not supported: name the days, e.g. '1-5' or 'L'"
        )
    probe = ["*"] * 5
    probe[index] = given
    try:
        croniter.expand(" ".join(probe))
    except CroniterError as exc:
        reason = _reason(exc)
        return (
            f"is not valid{': ' + reason if reason else ''}; the {FIELDS[index]} takes {TAKES[index]}, "
            "and ranges, steps and lists of them (1-5, */15, 1,15)"
        )
    for item, written in zip(items, part.split(","), strict=True):
        match = _RANGE.match(item)
        if match is None:
            continue
        low, high = _value(index, match["low"]), _value(index, match["high"])
        if low is None or high is None:
            continue
        if low == high:
            return (
                f"has the range {written}, which names one value: write {written.partition('-')[0]}"
            )
        if low > high:
            return (
                f"has the range {written}, which runs backwards: write it as two ranges or a list"
            )
    return None


def _value(index: int, token: str) -> int | None:
    if token.isdigit():
        return int(token)
    if index == DAY_OF_MONTH and token == "l":
        return 31
    return NAMES[index].get(token)


def _reason(exc: CroniterError) -> str:
    """What croniter's message adds to ours ('' when it only says "not acceptable")."""
    text = str(exc)
    for phrase, reason in _REASONS:
        if phrase in text:
            return reason
    return ""


@lru_cache(maxsize=512)
def never_fires_problem(expression: str) -> str | None:
    """Why a valid `expression` never fires (BY510), or None: no date matches it in LOOKAHEAD_YEARS.

    Bounded: croniter searches at most LOOKAHEAD_YEARS years, a few milliseconds.
    """
    if cron_problem(expression) is not None:
        return None
    start = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)
    try:
        _croniter(expression, start).get_next(datetime)
    except CroniterBadDateError:
        return (
            f"cron '{expression}' never fires: no date in the next {LOOKAHEAD_YEARS} years matches it "
            "(is the day of month one the month has?)"
        )
    return None


@lru_cache(maxsize=256)
def timezone_problem(name: str) -> str | None:
    """Why `name` is not an IANA time zone (BY508), or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone '{name}' (use an IANA name such as Europe/Paris, America/New_York or UTC)"
    return None


def schedule_problem(schedule: ScheduleSpec) -> str | None:
    """Why the scheduler can't use `schedule`, or None: what `validate` reports as BY507, BY510, BY508."""
    return (
        cron_problem(schedule.cron)
        or never_fires_problem(schedule.cron)
        or timezone_problem(schedule.timezone)
    )


def _croniter(expression: str, start: datetime) -> croniter:
    return croniter(
        " ".join(croniter_fields(expression)), start, max_years_between_matches=LOOKAHEAD_YEARS
    )


def fire_times(schedule: ScheduleSpec, after: datetime) -> Iterator[datetime]:
    """Fire times strictly after `after`, in UTC, computed in the schedule's time zone.

    Empty when the schedule is unusable (see `schedule_problem`).
    """
    if schedule_problem(schedule) is not None:
        return
    cron = _croniter(schedule.cron, after.astimezone(ZoneInfo(schedule.timezone)))
    while True:
        try:
            when = cron.get_next(datetime)
        except CroniterBadDateError:
            return
        yield when.astimezone(UTC)


def next_fire(schedule: ScheduleSpec, after: datetime) -> datetime | None:
    """The first fire time strictly after `after`, or None when the schedule is unusable."""
    return next(fire_times(schedule, after), None)


def latest_fire(schedule: ScheduleSpec, now: datetime) -> datetime | None:
    """The last fire time at or before `now` (cheap however long the server was down), or None."""
    if schedule_problem(schedule) is not None:
        return None
    probe = now.astimezone(ZoneInfo(schedule.timezone)) + timedelta(microseconds=1)
    try:
        return _croniter(schedule.cron, probe).get_prev(datetime).astimezone(UTC)
    except CroniterBadDateError:
        return None
