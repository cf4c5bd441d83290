"""GET /stats: per flow and version over a window — runs, failures, duration percentiles, tokens and
cost per run, total cost — the same report as `blockyard stats` (engine/state/stats.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.serve.problems import ApiError
from engine.serve.routes.deps import get_server
from engine.serve.server import Server
from engine.state import stats

router = APIRouter(tags=["runs"])
ServerDep = Annotated[Server, Depends(get_server)]


@router.get(
    "/stats",
    summary="Runs, failures, durations and cost per flow version over a window",
    description="`since`: a duration back from now (`7d`, `12h`, `90m`; default 7d) or a date (`2026-11-01`, "
    "UTC unless it has an offset). Totals count every run that started in the window; means, "
    "the failure rate and the p50/p95 durations are over the runs that ended. See "
    "docs/observability.md.",
)
async def get_stats(
    server: ServerDep,
    flow: str | None = None,
    since: Annotated[str, Query(max_length=64)] = stats.DEFAULT_SINCE,
) -> JsonDict:
    try:
        window = stats.window(since)
    except UsageError as exc:
        raise ApiError(422, "invalid_request", str(exc), field="since") from None
    service = server.service
    if service is None:
        raise ApiError(503, "starting", "the server is starting")
    found = await service.stats(window, flow)
    return found.as_dict()
