"""Asking servers that share a database to stop runs they hold (docs/langgraph-api.md, "Double
texting"): sent through the database (engine/state/backends.py, `cancel_request`: Postgres's NOTIFY,
which every replica listens to), read back here. A request names one run, or the turns of one thread
that a server accepted by a given time — so that a request delivered late never stops a turn accepted
after it was made (the servers' clocks are assumed to agree to within a millisecond or so, as the
lease times already assume).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from engine.serve.jobs import Job


@dataclass(frozen=True)
class Request:
    """Stop run `run`, or every turn of thread `thread` accepted no later than `before` (ISO time)."""

    reason: str
    run: str | None = None
    thread: str | None = None
    before: str | None = None

    def encode(self) -> str:
        """As a notification's payload (a few hundred bytes: NOTIFY takes up to 8000)."""
        said = {"reason": self.reason[:1000], "run": self.run, "thread": self.thread}
        return json.dumps({**said, "before": self.before})

    @classmethod
    def decode(cls, payload: str) -> Request | None:
        """A payload `encode` wrote; None for anything else (another version's, or garbage)."""
        try:
            data = json.loads(payload)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("reason"), str):
            return None
        fields = {key: data.get(key) for key in ("run", "thread", "before")}
        if not all(value is None or isinstance(value, str) for value in fields.values()):
            return None
        return cls(data["reason"], **fields)

    def chooses(self, jobs: Iterable[Job]) -> list[Job]:
        """Those of a server's jobs the request names (still going on)."""
        chosen = []
        for job in jobs:
            if job.task is None or job.task.done():
                continue
            if (self.run is not None and job.run_id == self.run) or (
                self.thread is not None
                and job.thread == self.thread
                and (self.before is None or job.created <= self.before)
            ):
                chosen.append(job)
        return chosen
