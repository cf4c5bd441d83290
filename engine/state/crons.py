"""Crons created over the LangGraph API (`POST /runs/crons`, `POST /threads/{id}/runs/crons`): rows of
`api_crons`, runtime objects apart from the `schedule:` of flows kept in Git. The server's scheduler
(engine/serve/schedules.py) fires them with the flows' schedules, each fire time claimed once across
replicas in `serve_schedules` under the key `cron:<id>`; engine/serve/langgraph_api/crons.py is the API.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.core.values import JsonDict
from engine.state.database import Connection
from engine.state.writer import Write

KEY_PREFIX = "cron:"  # serve_schedules.flow of a cron's fire times (no flow name has a colon)
_COLUMNS = (
    "id, flow, thread_id, cron, timezone, payload, metadata, enabled, end_time, created, updated"
)


@dataclass(frozen=True)
class ApiCron:
    """One row of `api_crons`. `payload`: what each run is started with — `inputs` (the flow's, checked
    when the cron was made), and the request's own keys as it sent them (`input`, `webhook`, ...)."""

    id: str
    flow: str
    thread_id: str | None
    cron: str
    timezone: str
    payload: JsonDict
    metadata: JsonDict = field(default_factory=dict)
    enabled: bool = True
    end_time: str | None = None  # ISO-8601 UTC: no fire time after it
    created: str = ""
    updated: str = ""

    @property
    def key(self) -> str:
        """Its row in serve_schedules."""
        return KEY_PREFIX + self.id


def _row(row: Any) -> ApiCron:
    return ApiCron(
        id=row[0],
        flow=row[1],
        thread_id=row[2],
        cron=row[3],
        timezone=row[4],
        payload=json.loads(row[5]),
        metadata=json.loads(row[6]),
        enabled=bool(row[7]),
        end_time=row[8],
        created=row[9],
        updated=row[10],
    )


def save(cron: ApiCron) -> Write:
    """Insert `cron`, or replace the row of its id (an update)."""
    return Write(
        f"INSERT INTO api_crons ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone, "
        "payload = excluded.payload, metadata = excluded.metadata, enabled = excluded.enabled, "
        "end_time = excluded.end_time, updated = excluded.updated",
        (
            cron.id,
            cron.flow,
            cron.thread_id,
            cron.cron,
            cron.timezone,
            json.dumps(cron.payload, default=str),
            json.dumps(cron.metadata, default=str),
            1 if cron.enabled else 0,
            cron.end_time,
            cron.created,
            cron.updated,
        ),
    )


def get(conn: Connection, cron_id: str) -> ApiCron | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM api_crons WHERE id = ?", (cron_id,)).fetchone()
    return _row(row) if row is not None else None


def search(
    conn: Connection,
    flow: str | None = None,
    thread_id: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[ApiCron]:
    """Crons of `flow` and of `thread_id` (either: any), oldest first."""
    where, params = _where(flow, thread_id)
    page = f" LIMIT {int(limit)} OFFSET {int(offset)}" if limit is not None else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM api_crons{where} ORDER BY created, id{page}", params
    ).fetchall()
    return [_row(row) for row in rows]


def count(conn: Connection, flow: str | None = None, thread_id: str | None = None) -> int:
    where, params = _where(flow, thread_id)
    return int(conn.execute(f"SELECT COUNT(*) FROM api_crons{where}", params).fetchone()[0])


def _where(flow: str | None, thread_id: str | None) -> tuple[str, tuple[str, ...]]:
    said = [
        (column, value) for column, value in (("flow", flow), ("thread_id", thread_id)) if value
    ]
    if not said:
        return "", ()
    return " WHERE " + " AND ".join(f"{column} = ?" for column, _ in said), tuple(
        value for _, value in said
    )


def delete(cron_id: str) -> Callable[[Connection], bool]:
    """A writer call: delete the cron and its fire times; whether there was one."""

    def apply(conn: Connection) -> bool:
        gone = conn.execute("DELETE FROM api_crons WHERE id = ?", (cron_id,)).rowcount
        conn.execute("DELETE FROM serve_schedules WHERE flow = ?", (KEY_PREFIX + cron_id,))
        return bool(gone)

    return apply
