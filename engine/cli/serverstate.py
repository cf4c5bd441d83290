"""`blockyard diff --server URL`: what exists now, read from a running `blockyard serve` over its HTTP API
(docs/serve.md) instead of the local state database, and judged as `--state` judges it
(engine/review/inflight.py): paused runs (`GET /runs?status=waiting`, then `GET /runs/{id}` for the gates
they wait at and the flow document they are pinned to), schedules (`GET /flows`: what the server fires
now, with its next fire time), threads (`GET /threads?flow=`).

The token is `--token` or BLOCKYARD_TOKEN, sent as `Authorization: Bearer` (engine/serve/auth.py). Every
failure — a URL that is not http(s), the server down or slow, a 401, an answer that is not the API's —
is a UsageError: one line, exit 2. This module is imported only by `diff --server`, so the other
commands never load httpx (engine/review/ may not import it at all: pyproject.toml's contracts).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import httpx

from engine.core.errors import UsageError
from engine.core.values import JsonDict
from engine.review.inflight import MAX_LISTED, Listing, PausedListing, ServedSchedule
from engine.serve.auth import TOKEN_ENV

TIMEOUT = 30.0  # seconds per request


class ServerState:
    """The in-flight listing of the server at `url`."""

    def __init__(self, url: str, token: str | None = None, timeout: float = TIMEOUT) -> None:
        try:
            parts = urlsplit(url)
            httpx.URL(url)  # what httpx refuses, refused here
            # .port: 0-65535
            fine = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
        except (ValueError, httpx.InvalidURL):
            fine = False
        if not fine:
            raise UsageError(f"--server needs an http:// or https:// URL with a host, got '{url}'")
        self.url = url.rstrip("/")
        self.token = token or os.environ.get(TOKEN_ENV, "").strip() or None
        self.timeout = timeout

    def listing(self, flows: set[str]) -> Listing:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        with httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout) as client:
            found = Listing(self.url, served=self._schedules(client))
            waiting = self._get(client, "/runs", {"status": "waiting", "limit": MAX_LISTED}, "runs")
            for run in waiting:
                if _text(run, "flow") in flows:
                    found.runs.append(self._paused(client, _text(run, "id")))
            for flow in sorted(flows):
                threads = self._get(
                    client, "/threads", {"flow": flow, "limit": MAX_LISTED}, "threads"
                )
                found.threads += [(_text(thread, "id"), flow) for thread in threads]
        return found

    def _schedules(self, client: httpx.Client) -> dict[str, ServedSchedule]:
        served: dict[str, ServedSchedule] = {}
        for flow in self._get(client, "/flows", {}, "flows"):
            schedule = flow.get("schedule")
            if isinstance(schedule, dict):
                next_fire = schedule.get("next_fire")
                served[_text(flow, "name")] = ServedSchedule(
                    _text(schedule, "cron"),
                    _text(schedule, "timezone"),
                    next_fire if isinstance(next_fire, str) else None,
                )
        return served

    def _paused(self, client: httpx.Client, run_id: str) -> PausedListing:
        run = self._answer(client, f"/runs/{run_id}", {})
        gates = run.get("gates")
        definition = run.get("definition")
        version = run.get("version")
        return PausedListing(
            run_id,
            _text(run, "flow"),
            version if isinstance(version, int) else 0,
            definition if isinstance(definition, dict) else None,
            [str(gate["step"]) for gate in gates if isinstance(gate, dict) and gate.get("step")]
            if isinstance(gates, list)
            else [],
        )

    def _get(
        self, client: httpx.Client, path: str, params: dict[str, Any], key: str
    ) -> list[JsonDict]:
        """The list under `key` of the answer to GET `path`."""
        items = self._answer(client, path, params).get(key)
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self._not_the_api(path, f"no list of {key}")
        return items

    def _answer(self, client: httpx.Client, path: str, params: dict[str, Any]) -> JsonDict:
        try:
            response = client.get(path, params=params)
        except httpx.TimeoutException:
            raise UsageError(
                f"the server at {self.url} did not answer GET {path} within {self.timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise UsageError(f"cannot reach the server at {self.url}: {_reason(exc)}") from None
        if response.status_code == 401:
            raise UsageError(
                f"the server at {self.url} refused the request (401): it needs a token; pass --token "
                f"or set {TOKEN_ENV}"
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200:
            error = body.get("error") if isinstance(body, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            if message is None:
                raise self._not_the_api(path, f"HTTP {response.status_code}")
            raise UsageError(
                f"the server at {self.url} answered GET {path} with {response.status_code}: {message}"
            )
        if not isinstance(body, dict):
            raise self._not_the_api(path, "not a JSON object")
        return body

    def _not_the_api(self, path: str, what: str) -> UsageError:
        return UsageError(
            f"{self.url} does not look like a Blockyard server: GET {path} gave {what}"
        )


def _text(item: JsonDict, key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise UsageError(f"unexpected answer from the server: no text '{key}' in {str(item)[:200]}")
    return value


def _reason(exc: httpx.HTTPError) -> str:
    """The innermost cause of a transport error, in one line (`[Errno 111] Connection refused`)."""
    cause: BaseException = exc
    inner = exc.__cause__ or exc.__context__
    while inner is not None:
        cause, inner = inner, inner.__cause__ or inner.__context__
    return " ".join(str(cause).split()) or type(exc).__name__
