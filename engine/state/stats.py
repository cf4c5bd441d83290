"""What runs cost and how they went, per flow and version over a window of time (`blockyard stats`,
`GET /stats`), and the usage totals of conversation threads (the thread resource of the server).

Both read the `runs` table only — its usage columns are the totals of each run's model calls
(migration 11, engine/core/usage.py) — in SQLite's SQL, which the Postgres connection translates
(engine/state/postgres.py). Sums are SQL's; the duration percentiles are computed here over the
durations of the window's ended runs, read in one more query bounded by the same window.

What counts (docs/observability.md, "Seeing it"): every run that started in the window adds to the
totals (what it spent is spent, even while it runs or waits at a gate); per-run means, the failure
rate and the duration percentiles are over the runs that ended (finished or failed), whose totals
are final. A price nobody knows is never taken for zero: a cost says how many runs had calls
without a price.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine.core.errors import UsageError
from engine.core.events import RunStatus
from engine.core.usage import SPEND_KEYS, Spend, money
from engine.core.values import JsonDict
from engine.spec.common import MAX_DURATION, duration_seconds
from engine.state.database import Connection
from engine.state.retention import cutoff

DEFAULT_SINCE = "7d"
ENDED = (RunStatus.FINISHED, RunStatus.FAILED)  # totals final: what means and percentiles are over
# a date, or a date and time (UTC unless it says otherwise), for `--since 2026-11-01`
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


@dataclass(frozen=True)
class Window:
    """From `since` (the runs table's time format) until now; `text` is how it was asked for."""

    since: str
    text: str


def window(text: str | None, now: datetime | None = None) -> Window:
    """`7d`, `12h`, `90m` back from `now`, or a date (`2026-11-01`, `2026-11-01T09:30`, UTC unless an
    offset is given); UsageError for anything else (the HTTP route makes it a 422)."""
    text = (text or DEFAULT_SINCE).strip()
    now = now or datetime.now(UTC)
    if _DATE.match(text):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"since '{text}': not a date (use e.g. 2026-11-01 or 2026-11-01T09:30)"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return Window(cutoff(moment, 0.0), text)
    try:
        seconds = duration_seconds(text)
    except ValueError:
        raise UsageError(
            f"since '{text}': not a duration such as 7d, 12h or 90m, nor a date such as 2026-11-01"
        ) from None
    if seconds > MAX_DURATION:
        raise UsageError(f"since '{text}': longer than ten years")
    return Window(cutoff(now, seconds), text)


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile of sorted `values` (a duration some run really took); None without any."""
    if not values:
        return None
    rank = max(1, math.ceil(share * len(values)))
    return values[rank - 1]


@dataclass
class Row:
    """One flow version over the window (`version` None: the flow's versions together)."""

    flow: str
    version: int | None
    runs: int = 0
    finished: int = 0
    failed: int = 0
    spend: Spend = field(default_factory=Spend)  # every run of the window
    unpriced_runs: int = 0  # runs with at least one call without a price
    ended_tokens: int = 0  # input + output tokens of the ended runs
    ended_cost: float = 0.0  # the known cost of the ended runs
    ended_unpriced: int = 0  # ended runs with a call without a price
    ended_unknown: int = 0  # ended runs with calls, none of them priced
    durations: list[float] = field(default_factory=list)  # of the ended runs, sorted

    @property
    def ended(self) -> int:
        return self.finished + self.failed

    @property
    def failure_rate(self) -> float | None:
        return self.failed / self.ended if self.ended else None

    @property
    def mean_tokens(self) -> float | None:
        return self.ended_tokens / self.ended if self.ended else None

    @property
    def mean_cost_usd(self) -> float | None:
        """The known cost per ended run; None when no ended run had a priced call but some had calls."""
        if not self.ended or (self.ended_unknown and self.ended_unknown == self.ended):
            return None
        return self.ended_cost / self.ended

    def mean_cost_text(self) -> str:
        """`$0.0012`; `>= $0.0012` when some ended runs had calls without a price; `unknown`; `-` without
        ended runs or model calls."""
        if not self.ended or not self.spend.model_calls:
            return "-"
        mean = self.mean_cost_usd
        if mean is None:
            return "unknown"
        return f">= {money(mean)}" if self.ended_unpriced else money(mean)

    def cost_text(self) -> str:
        """The window's total: `$0.0144`; `>= $0.0144 (2 runs unpriced)`; `unknown`; `-` without model calls."""
        spend = self.spend
        if spend.model_calls == 0:
            return "-"
        if spend.unpriced_calls == spend.model_calls:
            return "unknown"
        if self.unpriced_runs:
            return (
                f">= {money(spend.cost_usd)} ({self.unpriced_runs} run{'s' if self.unpriced_runs > 1 else ''} "
                "unpriced)"
            )
        return money(spend.cost_usd)

    def merge(self, other: Row) -> None:
        for name in (
            "runs",
            "finished",
            "failed",
            "unpriced_runs",
            "ended_tokens",
            "ended_cost",
            "ended_unpriced",
            "ended_unknown",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.spend.merge(other.spend)
        self.durations = sorted([*self.durations, *other.durations])

    def as_dict(self) -> JsonDict:
        rate = self.failure_rate
        mean_tokens = self.mean_tokens
        mean_cost = self.mean_cost_usd
        p50, p95 = percentile(self.durations, 0.5), percentile(self.durations, 0.95)
        return {
            "flow": self.flow,
            "version": self.version,
            "runs": self.runs,
            "finished": self.finished,
            "failed": self.failed,
            "failure_rate": round(rate, 4) if rate is not None else None,
            "duration_p50_s": round(p50, 3) if p50 is not None else None,
            "duration_p95_s": round(p95, 3) if p95 is not None else None,
            "mean_tokens": round(mean_tokens, 1) if mean_tokens is not None else None,
            "mean_cost_usd": mean_cost,
            "mean_cost": self.mean_cost_text(),
            "cost_usd": total_cost(self.spend),
            "unpriced_runs": self.unpriced_runs,
            "cost": self.cost_text(),
            "usage": usage_dict(self.spend),
        }


@dataclass
class Report:
    """`blockyard stats` and `GET /stats`: one row per flow version, and per flow over its versions."""

    window: Window
    flow: str | None
    versions: list[Row]

    def flows(self) -> list[Row]:
        """Per flow, its versions together (in the order of `versions`: by flow name)."""
        merged: dict[str, Row] = {}
        for row in self.versions:
            whole = merged.setdefault(row.flow, Row(row.flow, None))
            whole.merge(row)
        return list(merged.values())

    def as_dict(self) -> JsonDict:
        return {
            "since": self.window.since,
            "window": self.window.text,
            "flow": self.flow,
            "versions": [row.as_dict() for row in self.versions],
            "flows": [row.as_dict() for row in self.flows()],
        }


_ENDED_SQL = "status IN ('finished', 'failed')"
_SUMS = ", ".join(f"SUM({key})" for key in SPEND_KEYS)
_AGGREGATE = (
    "SELECT flow, version, COUNT(*), "
    "SUM(CASE WHEN status = 'finished' THEN 1 ELSE 0 END), SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), "
    f"{_SUMS}, "
    "SUM(CASE WHEN unpriced_calls > 0 THEN 1 ELSE 0 END), "
    f"SUM(CASE WHEN {_ENDED_SQL} THEN input_tokens + output_tokens ELSE 0 END), "
    f"SUM(CASE WHEN {_ENDED_SQL} THEN cost_usd ELSE 0 END), "
    f"SUM(CASE WHEN {_ENDED_SQL} AND unpriced_calls > 0 THEN 1 ELSE 0 END), "
    f"SUM(CASE WHEN {_ENDED_SQL} AND model_calls > 0 AND unpriced_calls = model_calls THEN 1 ELSE 0 END) "
    "FROM runs WHERE COALESCE(started, created) >= ?"
)


def _int(value: Any) -> int:
    return int(value or 0)  # Postgres's SUM of a BIGINT is a NUMERIC (a Decimal here)


def report(conn: Connection, since: Window, flow: str | None = None) -> Report:
    """Every flow version with runs that started in the window (or only `flow`'s), by flow and version."""
    params: list[Any] = [since.since]
    where = ""
    if flow is not None:
        where = " AND flow = ?"
        params.append(flow)
    rows: dict[tuple[str, int], Row] = {}
    for values in conn.execute(
        f"{_AGGREGATE}{where} GROUP BY flow, version ORDER BY flow, version", params
    ):
        name, version, count, finished, failed, *rest = values
        spend = Spend.of(dict(zip(SPEND_KEYS, rest[: len(SPEND_KEYS)], strict=True)))
        unpriced, tokens, cost, ended_unpriced, ended_unknown = rest[len(SPEND_KEYS) :]
        rows[(name, int(version))] = Row(
            name,
            int(version),
            _int(count),
            _int(finished),
            _int(failed),
            spend,
            _int(unpriced),
            _int(tokens),
            float(cost or 0.0),
            _int(ended_unpriced),
            _int(ended_unknown),
        )
    durations: dict[tuple[str, int], list[float]] = {}
    for name, version, duration in conn.execute(
        f"SELECT flow, version, duration FROM runs WHERE COALESCE(started, created) >= ?{where} "
        f"AND {_ENDED_SQL}",
        params,
    ):
        durations.setdefault((name, int(version)), []).append(float(duration or 0.0))
    for key, taken in durations.items():
        if key in rows:
            rows[key].durations = sorted(taken)
    return Report(since, flow, list(rows.values()))


def thread_spend(conn: Connection, thread_ids: Iterable[str]) -> dict[str, Spend]:
    """The usage totals of each thread's turns (its runs); a thread without runs is absent."""
    ids = list(dict.fromkeys(thread_ids))
    found: dict[str, Spend] = {}
    # SQLite allows some 32k parameters; a page of threads is 1000 at most
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        for thread_id, *sums in conn.execute(
            f"SELECT thread_id, {_SUMS} FROM runs WHERE thread_id IN ({marks}) GROUP BY thread_id",
            chunk,
        ):
            found[thread_id] = Spend.of(dict(zip(SPEND_KEYS, sums, strict=True)))
    return found


def total_cost(spend: Spend) -> float | None:
    """The known cost of `spend`; None when it had model calls and none of them had a price."""
    if spend.model_calls and spend.unpriced_calls == spend.model_calls:
        return None
    return spend.cost_usd


def usage_dict(spend: Spend | Mapping[str, Any]) -> JsonDict:
    """Usage totals as the JSON of a run, a thread or a step (docs/observability.md): the counts,
    `cost_usd` (the known cost; null when no call had a price), `unpriced_calls`, `tokens` (input
    plus output) and `cost`, the text people read (`$0.0123`, `unknown`, `>= $0.01 (2 unpriced)`, `-`)."""
    totals = spend if isinstance(spend, Spend) else Spend.of(spend)
    return {
        **totals.as_dict(),
        "cost_usd": total_cost(totals),
        "tokens": totals.tokens,
        "cost": totals.cost_text(),
    }


def waiting_by_flow(conn: Connection) -> dict[str, int]:
    """How many runs wait at an approval gate, per flow (the `blockyard_runs_waiting` gauge)."""
    return {
        flow: int(count)
        for flow, count in conn.execute(
            "SELECT flow, COUNT(*) FROM runs WHERE status = 'waiting' GROUP BY flow"
        )
    }
