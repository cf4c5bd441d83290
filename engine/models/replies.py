"""The shape of a scripted mock reply (docs/models.md, "Scripted replies").

A reply is either a value (the block's outputs, or for a single output the bare value; text is
read as JSON when it is a JSON object) or a directive, a mapping whose keys start with `$`:

- `{$text: "..."}`: an agent turn that answers in plain text;
- `{$tool_calls: [{name, args?, id?}, ...], $text?: "..."}`: an agent turn that calls tools
  (`args` that are not an object make a malformed call on purpose, as a model's broken JSON;
  `id` names the call, default `mock_<turn>_<position>`);
- `{$error: KIND, message?: "..."}`: the model call fails (KIND `timeout`, `rate_limit`,
  `server_error` or `connection` is transient and retried).

An entry of a reply list may also be a rule, `{when: {contains: TEXT, regex: RE2}, reply: REPLY}`
(one condition or both): it answers only when the text sent to the model matches (`contains`
ignores case; `regex` is an RE2 search), every time it matches (docs/models.md).

`blockyard validate` checks the replies of blockyard.yaml and `blockyard test` those of flow
tests with `reply_problems`; the mock checks each reply once more before using it, for scripts
registered from Python. Values are not judged here: a script may play a model that answers with
what the engine refuses (engine/core/values.py), to test that. No LangGraph here: the validator imports this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.core.values import JsonDict

DIRECTIVES = ("$text", "$tool_calls", "$error")
_CALL_KEYS = ("name", "args", "id")
RULE_KEYS = ("when", "reply")
CONDITIONS = ("contains", "regex")

Where = tuple[str | int, ...]


def is_rule(entry: Any) -> bool:
    """A rule entry: a mapping with `when` and no keys but `when` and `reply`. (A block whose only
    outputs are named `when` and `reply` must script its replies as JSON text.)"""
    return isinstance(entry, dict) and "when" in entry and all(key in RULE_KEYS for key in entry)


@dataclass(frozen=True)
class Rule:
    """A rule entry, ready to match. A malformed one matches everything and answers with itself, so
    the mock's check of the reply it is about to use reports the problem (scripts from Python)."""

    contains: str | None
    regex: Any  # a compiled RE2 pattern, or None
    reply: Any
    broken: bool = False

    @classmethod
    def of(cls, entry: JsonDict) -> Rule:
        if next(reply_problems(entry), None) is not None:
            return cls(None, None, entry, broken=True)
        when = entry["when"]
        pattern = when.get("regex")
        contains = when.get("contains")
        return cls(
            contains.casefold() if contains is not None else None,
            _re2(pattern) if pattern is not None else None,
            entry["reply"],
        )

    def matches(self, text: str) -> bool:
        if self.broken:
            return True
        if self.contains is not None and self.contains not in text.casefold():
            return False
        return self.regex is None or self.regex.search(text) is not None


def reply_problems(reply: Any) -> Iterator[tuple[Where, str]]:
    """(path inside the reply, what is wrong) for every problem of one scripted reply (or rule)."""
    if is_rule(reply):
        yield from _rule_problems(reply)
        return
    if (
        not isinstance(reply, dict)
        or not all(isinstance(key, str) for key in reply)
        or not any(key.startswith("$") for key in reply)
    ):
        return  # a plain value: the step's output check judges it, as for a real model's answer
    for key in reply:
        if key.startswith("$") and key not in DIRECTIVES:
            yield (
                (key,),
                f"unknown directive '{key}'; a scripted reply may use {', '.join(DIRECTIVES)}",
            )
    if "$error" in reply:
        yield from _error_problems(reply)
        return
    plain = [key for key in reply if not key.startswith("$")]
    if plain:
        yield (
            (plain[0],),
            (
                f"'{plain[0]}' next to {', '.join(k for k in reply if k.startswith('$'))}: a reply is "
                "either a directive or a value (put the final answer in a later reply)"
            ),
        )
    if "$text" in reply and not isinstance(reply["$text"], str):
        yield ("$text",), f"$text must be text, got {_kind(reply['$text'])}"
    if "$tool_calls" in reply:
        yield from _calls_problems(reply["$tool_calls"])


def _rule_problems(rule: JsonDict) -> Iterator[tuple[Where, str]]:
    when = rule["when"]
    if "reply" not in rule:
        yield (
            ("when",),
            "a rule `{when: ..., reply: ...}` needs `reply`, the reply it gives when it matches",
        )
    if not isinstance(when, dict) or not when:
        yield (
            ("when",),
            (
                f"`when` must be a mapping of conditions ({' and/or '.join(CONDITIONS)}), "
                f"got {_kind(when)}"
            ),
        )
    else:
        for key, value in when.items():
            if key not in CONDITIONS:
                yield (
                    ("when", key),
                    f"unknown condition '{key}' (a rule matches on {', '.join(CONDITIONS)})",
                )
            elif not isinstance(value, str) or not value:
                yield ("when", key), f"`{key}` must be non-empty text, got {_kind(value)}"
            elif key == "regex":
                problem = _regex_problem(value)
                if problem is not None:
                    yield ("when", key), problem
    if "reply" in rule:
        if is_rule(rule["reply"]):
            yield (
                ("reply",),
                "a rule's reply cannot be another rule: put both conditions in one `when`",
            )
        else:
            for where, problem in reply_problems(rule["reply"]):
                yield ("reply", *where), problem


def _re2(pattern: str) -> Any:
    import re2  # google-re2 (linear time), never Python's backtracking `re` on a yard's pattern

    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options=options)


def _regex_problem(pattern: str) -> str | None:
    import re2  # for its error type; loads only when a reply has a regex rule

    try:
        _re2(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return f"regex '{pattern}' is not valid RE2: {text}"
    return None


def _error_problems(reply: JsonDict) -> Iterator[tuple[Where, str]]:
    kind = reply["$error"]
    if not isinstance(kind, str) or not kind:
        yield (
            ("$error",),
            f"$error must be an error kind such as timeout or rate_limit, got {_kind(kind)}",
        )
    for key in reply:
        if key not in ("$error", "message"):
            yield (key,), f"'{key}' next to $error: an error reply takes only `message`"
    if "message" in reply and not isinstance(reply["message"], str):
        yield ("message",), f"message must be text, got {_kind(reply['message'])}"


def _calls_problems(calls: Any) -> Iterator[tuple[Where, str]]:
    if not isinstance(calls, list):
        yield (
            ("$tool_calls",),
            f"$tool_calls must be a list of {{name, args}} calls, got {_kind(calls)}",
        )
        return
    ids: set[str] = set()
    for position, call in enumerate(calls):
        where: Where = ("$tool_calls", position)
        if not isinstance(call, dict):
            yield where, f"a tool call must be a mapping {{name, args}}, got {_kind(call)}"
            continue
        for key in call:
            if key not in _CALL_KEYS:
                yield (
                    (*where, key),
                    f"unknown key '{key}' in a tool call (it takes {', '.join(_CALL_KEYS)})",
                )
        name = call.get("name")
        if not isinstance(name, str) or not name:
            yield (
                (*where, "name") if "name" in call else where,
                f"a tool call needs `name`, the tool's name as text, got {_kind(name)}",
            )
        ident = call.get("id")
        if "id" in call:
            if not isinstance(ident, str) or not ident:
                yield (*where, "id"), f"a tool call's id must be text, got {_kind(ident)}"
            elif ident in ids:
                yield (*where, "id"), f"tool call id '{ident}' is used twice in this reply"
            else:
                ids.add(ident)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return "empty text" if not value else "text"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
