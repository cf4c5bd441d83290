"""Eval results kept in the yard's state database (the `eval_results` table, migration 12), per flow
version: `blockyard eval` records each eval it ran on each side, and `blockyard eval --history NAME`
shows how the eval's pass rate, score, cost and latency moved from one version of its flow to the next.

A flow version is the pinned definition's digest (engine/evals/targets.py): a change of the flow, a block
it uses, a prompt file or blockyard.yaml makes a new one. History lists one line per version — the
latest result of that version, how many times it was evaluated, and the change from the version before
— oldest first. Rows are written through the state database's writer in one transaction; the table is
copied by `blockyard db copy` like the others (engine/state/transfer.py), on SQLite and Postgres alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.core.events import now_iso
from engine.core.values import JsonDict
from engine.evals.results import EvalResult
from engine.state.checkpointer import StateDB
from engine.state.database import Connection
from engine.state.ids import new_run_id
from engine.state.writer import Write

COLUMNS = (
    "id",
    "eval",
    "target",
    "digest",
    "version",
    "side",
    "label",
    "revision",
    "created",
    "cases",
    "passed",
    "pass_rate",
    "mean_score",
    "cost_usd",
    "unpriced_calls",
    "tokens",
    "latency_ms",
    "ok",
    "results",
)


def row_of(result: EvalResult, created: str) -> Write:
    spend = result.spend
    values = (
        new_run_id(),
        result.name,
        result.target,
        result.digest,
        result.version,
        result.side,
        result.label,
        result.revision,
        created,
        len(result.cases),
        result.passed_count,
        result.pass_rate,
        result.mean_score,
        spend.cost_usd,
        spend.unpriced_calls,
        spend.tokens,
        result.mean_latency_ms,
        int(result.ok),
        json.dumps([case.as_dict() for case in result.cases], ensure_ascii=False, default=str),
    )
    return Write(
        f"INSERT INTO eval_results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})",
        values,
    )


def record(db: StateDB, results: list[EvalResult]) -> None:
    """Keep `results` (evals whose flow could not run on a side are left out: they measured nothing)."""
    created = now_iso()
    writes = [
        row_of(result, created) for result in results if result.problem is None and result.cases
    ]
    if writes:
        db.writer.write_sync(*writes)


@dataclass(frozen=True)
class Version:
    """One flow version of an eval's history: its latest result, and how often it was evaluated."""

    digest: str | None
    version: int | None
    target: str
    first: str  # when it was first evaluated
    last: str  # when it was last evaluated
    runs: int
    label: str
    revision: str | None
    cases: int
    passed: int
    pass_rate: float
    mean_score: float
    cost_usd: float
    unpriced_calls: int
    tokens: int
    latency_ms: float
    ok: bool

    def as_dict(self) -> JsonDict:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


def versions(conn: Connection, name: str) -> list[Version]:
    """The flow versions eval `name` ran on, oldest first."""
    rows = conn.execute(
        f"SELECT {', '.join(COLUMNS[:-1])} FROM eval_results WHERE eval = ? ORDER BY created, id",
        (name,),
    ).fetchall()
    found: dict[str | None, Version] = {}
    for row in rows:
        data = dict(zip(COLUMNS[:-1], row, strict=True))
        earlier = found.pop(data["digest"], None)
        found[data["digest"]] = Version(
            digest=data["digest"],
            version=data["version"],
            target=data["target"],
            first=earlier.first if earlier is not None else data["created"],
            last=data["created"],
            runs=(earlier.runs if earlier is not None else 0) + 1,
            label=data["label"],
            revision=data["revision"],
            cases=int(data["cases"]),
            passed=int(data["passed"]),
            pass_rate=float(data["pass_rate"]),
            mean_score=float(data["mean_score"]),
            cost_usd=float(data["cost_usd"]),
            unpriced_calls=int(data["unpriced_calls"]),
            tokens=int(data["tokens"]),
            latency_ms=float(data["latency_ms"]),
            ok=bool(data["ok"]),
        )
    return sorted(found.values(), key=lambda version: version.first)


def names(conn: Connection) -> list[str]:
    """Every eval with a result kept."""
    return [
        str(row[0])
        for row in conn.execute("SELECT DISTINCT eval FROM eval_results ORDER BY eval").fetchall()
    ]
