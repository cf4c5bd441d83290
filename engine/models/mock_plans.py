"""The offline mock's TaskPlans: what it answers to `blockyard compose` (docs/compose.md).

A compose request (`StructuredRequest.purpose == "compose"`) carries the intent and the yard's
catalog in its inputs: `{intent, catalog: [{block, kind, description, category, tags, inputs,
outputs}], previous_plan?, problems?}`. The mock drafts a plan from them, deterministically:

- a schedule phrase of the intent ("every Tuesday at 1pm", "daily at 9:30", "every weekday",
  "every hour") becomes the plan's `schedule` (UTC); anything else is left to a real model;
- the blocks that share the most words with the rest of the intent (their name, description,
  category and tags) are picked, at most `MAX_STEPS`, ties broken by name; blocks the mock cannot
  place on its own are left out (decide blocks need branches, memory blocks a memory scope, a
  block with a required input that is neither text nor made by another picked block);
- they run one after the other (`depends_on` the previous step), producers before the blocks that
  read their outputs; each required input is mapped from an earlier output of the same name and
  type (`{{ context.NAME }}`), else, for text, from the flow input `intent`, whose default is
  the intent itself;
- on a repair round (`problems` given), the blocks of the steps the problems point at
  (`steps[N]`) are left out of the next draft.

No block matching: the first block the mock can place, by name. Same request, same plan.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.values import JsonDict

MAX_STEPS = 4
INTENT_INPUT = "intent"

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "each",
        "every",
        "for",
        "from",
        "get",
        "give",
        "go",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "so",
        "some",
        "that",
        "the",
        "them",
        "then",
        "this",
        "to",
        "up",
        "us",
        "we",
        "what",
        "when",
        "with",
        "you",
        "your",
    }
)
_UNPLACEABLE = frozenset({"decide", "memory_read", "memory_write"})
_DAYS = {
    "monday": "MON",
    "tuesday": "TUE",
    "wednesday": "WED",
    "thursday": "THU",
    "friday": "FRI",
    "saturday": "SAT",
    "sunday": "SUN",
}
_TIME = (
    r"(?:at\s+)?(?P<time>noon|midnight|(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<half>am|pm)?)"
)
_SCHEDULES = (
    # (pattern, what the days field becomes: a fixed text or the matched weekday)
    (
        re.compile(
            rf"\b(?:every|on|each)\s+(?P<day>(?:mon|tues|wednes|thurs|fri|satur|sun)day)s?"
            rf"(?:\s+{_TIME})?",
            re.IGNORECASE,
        ),
        None,
    ),
    (
        re.compile(
            rf"\b(?:every\s+weekday|on\s+weekdays|each\s+weekday)(?:\s+{_TIME})?", re.IGNORECASE
        ),
        "1-5",
    ),
    (re.compile(rf"\b(?:every\s+day|daily|each\s+day)(?:\s+{_TIME})?", re.IGNORECASE), "*"),
)
_HOURLY = re.compile(r"\b(?:every\s+hour|hourly|each\s+hour)\b", re.IGNORECASE)


def words(text: str) -> set[str]:
    """The significant words of a text, lower case, a plural's `s` dropped (`orders` -> `order`)."""
    found = set()
    for word in _WORD.findall(text.lower().replace("_", " ")):
        if word in _STOP or len(word) < 2:
            continue
        found.add(
            word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
        )
    return found


def parse_schedule(intent: str) -> tuple[JsonDict | None, str]:
    """The plan's `schedule` for a simple phrase of the intent, and the intent without the phrase."""
    hourly = _HOURLY.search(intent)
    if hourly:
        return (
            {"cron_expression": "0 * * * *", "timezone": "UTC", "human_readable": hourly.group(0)},
            intent[: hourly.start()] + intent[hourly.end() :],
        )
    for pattern, days in _SCHEDULES:
        found = pattern.search(intent)
        if found is None:
            continue
        clock = _clock(found)
        if clock is None:
            continue  # "every day at 25pm": not a time, so no schedule
        hour, minute = clock
        day_field = days if days is not None else _DAYS[found.group("day").lower()]
        schedule = {
            "cron_expression": f"{minute} {hour} * * {day_field}",
            "timezone": "UTC",
            "human_readable": found.group(0).strip(),
        }
        return schedule, intent[: found.start()] + intent[found.end() :]
    return None, intent


def _clock(found: re.Match[str]) -> tuple[int, int] | None:
    """(hour, minute) of the phrase's time; midnight when it names none."""
    if found.group("time") is None:
        return 0, 0
    named = found.group("time").lower()
    if named in ("noon", "midnight"):
        return (12 if named == "noon" else 0), 0
    hour, minute = int(found.group("hour")), int(found.group("minute") or 0)
    half = (found.group("half") or "").lower()
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    return hour, minute


def compose_plan(inputs: Mapping[str, Any]) -> JsonDict:
    """A TaskPlan for a compose request's inputs (see the module's docstring)."""
    intent = str(inputs.get("intent") or "")
    catalog = [
        entry
        for entry in inputs.get("catalog") or []
        if isinstance(entry, dict) and entry.get("block")
    ]
    excluded = _blamed(inputs.get("previous_plan"), inputs.get("problems"))
    schedule, rest = parse_schedule(intent)
    wanted = words(rest)
    usable = [
        entry
        for entry in catalog
        if entry["block"] not in excluded and entry.get("kind") not in _UNPLACEABLE
    ]
    scored = sorted(
        ((len(wanted & _entry_words(entry)), str(entry["block"])) for entry in usable),
        key=lambda pair: (-pair[0], pair[1]),
    )
    by_name = {str(entry["block"]): entry for entry in usable}
    chosen = [name for score, name in scored if score > 0][: MAX_STEPS * 2]
    picked = _placeable(chosen, by_name)[:MAX_STEPS]
    if not picked:
        picked = _placeable(sorted(by_name), by_name)[:1]
    plan: JsonDict = {
        "plan_id": _plan_id(rest),
        "user_intent": intent,
        "entry_step_id": picked[0] if picked else "nothing",
        "steps": _steps(picked, by_name),
    }
    if any(
        f"{{{{ inputs.{INTENT_INPUT} }}}}" in str(step.get("input_mappings"))
        for step in plan["steps"]
    ):
        plan["inputs"] = {
            INTENT_INPUT: {
                "type": "string",
                "description": "What the user asked for.",
                "default": intent,
            }
        }
    if schedule is not None:
        plan["schedule"] = schedule
    return plan


def _entry_words(entry: Mapping[str, Any]) -> set[str]:
    tags = entry.get("tags") or []
    text = " ".join(
        [
            str(entry.get("block") or ""),
            str(entry.get("description") or ""),
            str(entry.get("category") or ""),
            *(str(tag) for tag in tags if tag != "example"),
        ]
    )
    return words(text)


def _blamed(previous: Any, problems: Any) -> set[str]:
    """The blocks of the previous plan's steps that a problem points at (`steps[N]...`)."""
    if not isinstance(previous, dict) or not isinstance(problems, list):
        return set()
    given = previous.get("steps")
    steps: list[Any] = given if isinstance(given, list) else []
    blamed = set()
    for problem in problems:
        for index in re.findall(r"steps\[(\d+)\]", str(problem)):
            if int(index) < len(steps) and isinstance(steps[int(index)], dict):
                blamed.add(str(steps[int(index)].get("block_id")))
    return blamed


def _required(entry: Mapping[str, Any]) -> dict[str, JsonDict]:
    declared = entry.get("inputs") or {}
    return {
        name: spec
        for name, spec in declared.items()
        if isinstance(spec, dict) and spec.get("required")
    }


def _placeable(names: Sequence[str], by_name: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names in a runnable order (producers first), without those whose required inputs
    nothing can feed: a required input is text (the intent feeds it) or made by another of them."""
    kept = list(names)
    while True:
        made = {
            (out, _type(spec))
            for name in kept
            for out, spec in (by_name[name].get("outputs") or {}).items()
        }
        fed = [
            name
            for name in kept
            if all(
                _type(spec) == "string" or _fits(need, spec, made)
                for need, spec in _required(by_name[name]).items()
            )
        ]
        if fed == kept:
            break
        kept = fed
    ordered: list[str] = []
    waiting = list(kept)
    while waiting:
        # the best-scored block none of whose inputs another waiting block makes (a cycle: the best)
        ready = next(
            (
                name
                for name in waiting
                if not any(
                    _feeds(by_name[other], by_name[name]) for other in waiting if other != name
                )
            ),
            waiting[0],
        )
        ordered.append(ready)
        waiting.remove(ready)
    return ordered


def _feeds(producer: Mapping[str, Any], consumer: Mapping[str, Any]) -> bool:
    return bool(set(producer.get("outputs") or {}) & set(consumer.get("inputs") or {}))


def _type(spec: Mapping[str, Any]) -> str:
    return str(spec.get("type") or "any")


def _fits(name: str, spec: Mapping[str, Any], made: set[tuple[str, str]]) -> bool:
    wanted = _type(spec)
    return any(out == name and (wanted == "any" or kind in (wanted, "any")) for out, kind in made)


def _steps(picked: Sequence[str], by_name: Mapping[str, Mapping[str, Any]]) -> list[JsonDict]:
    steps: list[JsonDict] = []
    made: dict[str, str] = {}  # output -> its type, of the steps so far
    for position, name in enumerate(picked):
        entry = by_name[name]
        mappings: dict[str, str] = {}
        for need, spec in (entry.get("inputs") or {}).items():
            if not isinstance(spec, dict):
                continue
            if need in made and (_type(spec) == "any" or made[need] in (_type(spec), "any")):
                mappings[need] = f"{{{{ context.{need} }}}}"
            elif spec.get("required") and _type(spec) == "string":
                mappings[need] = f"{{{{ inputs.{INTENT_INPUT} }}}}"
        step: JsonDict = {
            "step_id": name,
            "block_id": name,
            "description": str(entry.get("description") or name).strip()[:200],
        }
        if position:
            step["depends_on"] = [picked[position - 1]]
        if mappings:
            step["input_mappings"] = mappings
        steps.append(step)
        for out, spec in (entry.get("outputs") or {}).items():
            if isinstance(spec, dict):
                made[out] = _type(spec)
    return steps


def _plan_id(rest: str) -> str:
    found = [word for word in _WORD.findall(rest.lower()) if word not in _STOP][:4]
    text = "_".join(found) or "composed"
    return text if text[0].isalpha() else f"plan_{text}"
