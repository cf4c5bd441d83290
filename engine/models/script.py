"""Scripted mock replies: from a profile's `replies`, or registered by tests for one run id.

Replies are looked up by `<flow>.<step>`, then the step id, then the block id. Under each key,
rule replies (`{when: {contains: ..., regex: ...}, reply: ...}`) are tried first, in list order,
against the text sent to the model, and fire every time they match; then the ordered replies are
used in order, and when they are exhausted the last one repeats (docs/models.md); an agent's turn N
takes at least the Nth, so that a loop resumed in the middle goes on with its own replies. A script
registered for a run id (`scripted(run_id, {...})`) makes every model call of that run go to the mock, so flow tests
never reach the network, and records every request it saw in `calls`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from engine.models.agentic import TurnRequest
from engine.models.base import StructuredRequest
from engine.models.replies import Rule, is_rule


class MockScript:
    """Replies per key, consumed in order (the last one repeats)."""

    def __init__(self, replies: Mapping[str, Sequence[Any]] | None = None) -> None:
        self._replies: dict[str, list[Any]] = {}
        self._rules: dict[str, list[Rule]] = {}
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()
        self.calls: list[StructuredRequest | TurnRequest] = []
        for key, values in (replies or {}).items():
            self.add(key, *values)

    def __repr__(self) -> str:
        return f"MockScript(keys={sorted(self._replies)!r}, calls={len(self.calls)})"

    def add(self, key: str, *replies: Any) -> MockScript:
        """Append replies for a key (`flow.step`, a step id or a block id)."""
        with self._lock:
            self._replies.setdefault(key, []).extend(
                reply for reply in replies if not is_rule(reply)
            )
            rules = [Rule.of(reply) for reply in replies if is_rule(reply)]
            if rules:
                self._rules.setdefault(key, []).extend(rules)
        return self

    def record(self, request: StructuredRequest | TurnRequest) -> None:
        with self._lock:
            self.calls.append(request)

    def next_reply(
        self, request: StructuredRequest | TurnRequest, sent: Callable[[], str] = lambda: ""
    ) -> tuple[bool, Any]:
        """(True, reply) for the request's next scripted reply, (False, None) when none is scripted.
        `sent` gives the text sent to the model, which rule replies match (asked only if there are rules)."""
        text: str | None = None
        with self._lock:
            for key in (f"{request.flow}.{request.step}", request.step, request.block):
                for rule in self._rules.get(key, ()):
                    if text is None:
                        text = sent()
                    if rule.matches(text):
                        return True, rule.reply
                replies = self._replies.get(key)
                if replies:
                    # an agent's loop resumed at its turn N (it waited for a person before a tool
                    # call) goes on with the reply of turn N, though this execution's script is new
                    used = max(self._used.get(key, 0), getattr(request, "turn", 1) - 1)
                    self._used[key] = used + 1
                    return True, replies[min(used, len(replies) - 1)]
        return False, None


_RUN_SCRIPTS: dict[str, MockScript] = {}
_REGISTRY_LOCK = threading.Lock()


def register_script(run_id: str, script: MockScript) -> None:
    """Route every model call of run `run_id` to the mock, answering from `script` first."""
    with _REGISTRY_LOCK:
        _RUN_SCRIPTS[run_id] = script


def unregister_script(run_id: str) -> None:
    with _REGISTRY_LOCK:
        _RUN_SCRIPTS.pop(run_id, None)


def script_for(run_id: str | None) -> MockScript | None:
    if run_id is None:
        return None
    with _REGISTRY_LOCK:
        return _RUN_SCRIPTS.get(run_id)


@contextmanager
def scripted(
    run_id: str, replies: Mapping[str, Sequence[Any]] | None = None
) -> Iterator[MockScript]:
    """`with scripted("run-1", {"check": ["yes"]}) as script:` — a registered script for one run."""
    script = MockScript(replies)
    register_script(run_id, script)
    try:
        yield script
    finally:
        unregister_script(run_id)
