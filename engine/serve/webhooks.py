"""Webhooks: a POST to the URL a run was started with (`webhook` in the body of `POST /flows/{name}/runs`
or of a LangGraph API run) when the run waits at an approval gate and when it ends.

The URL is judged when the run is created: http or https, on a host that `http.allowed_hosts` of the
run's blockyard.yaml allows — the very rule of the http_request tool (`host_allowed`), so that a caller
cannot make the server reach an address the yard's tools may not (cloud metadata at 169.254.169.254,
services on the private network). Redirects are not followed: a redirect to another host would escape
that rule.

Delivery never delays a run or its answer and never fails it: it is a task on the server's loop, started
when the run's job settles. A connection error, a timeout or a 5xx is retried with exponential backoff,
`server.webhooks.attempts` times in all; every attempt is a `webhook_attempt` line of the server log (run,
attempt, status or error) and the outcome a `webhook_delivered` or `webhook_failed` line. The run's event
trace is not written to: a finished run's trace is closed (its last event ends it), so the log is the record.

The body is signed when `server.webhooks.secret_env` names an environment variable: the headers
`X-Blockyard-Timestamp` (Unix seconds) and `X-Blockyard-Signature: sha256=<hex>`, the HMAC-SHA256 with
that secret of `<timestamp>.<body>` — the timestamp is signed too, so that a receiver refusing old
timestamps refuses replays. A configured variable that is not set sends nothing (logged): an operator who
asked for signatures never has run data sent unsigned. Without `secret_env` the POST is unsigned.

The URL of a run waiting at a gate is kept in the server's memory until the run ends, so the resume's end
is posted too; a server that restarts meanwhile (or another replica that resumes the run) forgets it.
See docs/serve.md, "Webhooks".
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from engine.core.events import RunStatus, now_iso
from engine.core.hosts import webhook_refusal
from engine.core.values import JsonDict
from engine.serve.jobs import Job
from engine.serve.logs import fields, get_logger
from engine.serve.problems import ApiError
from engine.spec import parse_duration
from engine.spec.config import NotifySpec, WebhooksSpec

SIGNATURE = "X-Blockyard-Signature"
TIMESTAMP = "X-Blockyard-Timestamp"
DELIVERY = (
    "X-Blockyard-Delivery"  # the same on every attempt of one POST: receivers drop duplicates by it
)
ATTEMPT = "X-Blockyard-Attempt"
BACKOFF = 0.5  # seconds before the second attempt; doubled before each further one
MAX_BACKOFF = 30.0
MAX_WAITING = 10_000  # URLs of runs waiting at a gate kept in memory (the oldest are forgotten)


# a flow's yard-level `notify:` subscriptions and the hosts its yard allows (engine/serve/server.py)
Notify = tuple[Sequence[NotifySpec], Sequence[str]]


@dataclass(frozen=True)
class Subscription:
    """Where a run's webhooks go, and the thread it is a turn of (a resume's job does not say)."""

    url: str
    thread_id: str | None


def refusal(url: str, allowed: Sequence[str]) -> str | None:
    """Why `url` may not receive webhooks (None: it may): the http_request tool's host rule."""
    return webhook_refusal(url, allowed)


def payload(job: Job, subscription: Subscription, result: JsonDict) -> JsonDict:
    """The JSON posted: the run as LangGraph's server posts it (run_id, thread_id, assistant_id, status) with
    Blockyard's own keys (flow, version, outputs, error, step, gates)."""
    status = result.get("status", RunStatus.FAILED)
    body: JsonDict = {
        "event": "run.waiting" if status == RunStatus.WAITING else "run.ended",
        "run_id": job.run_id,
        "thread_id": subscription.thread_id,
        "assistant_id": job.flow,
        "flow": job.flow,
        "version": job.version,
        "status": status,
        "outputs": result.get("outputs"),
        "error": result.get("error"),
        "step": result.get("step"),
        "webhook_sent_at": now_iso(),
    }
    if status == RunStatus.WAITING:
        body["gates"] = result.get("waiting") or []
    return body


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of `<timestamp>.<body>` with `secret`."""
    digest = hmac.new(
        secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256
    ).hexdigest()
    return f"sha256={digest}"


class Webhooks:
    """The server's webhooks: which runs have one, and the deliveries under way."""

    def __init__(
        self,
        settings: Callable[[], WebhooksSpec],
        notify: Callable[[str], Notify] = lambda _flow: ((), ()),
    ) -> None:
        self.settings = settings  # read at each delivery: blockyard.yaml may be reloaded
        # a flow's yard-level `notify:` and its allowed hosts, as served now (read at each settle)
        self.notify = notify
        self.log = get_logger()
        self._subscriptions: OrderedDict[str, Subscription] = OrderedDict()
        self._deliveries: set[asyncio.Task[None]] = set()

    def check(self, url: str, allowed: Sequence[str]) -> None:
        """422 `webhook_refused` unless `url` may receive webhooks."""
        problem = refusal(url, allowed)
        if problem is not None:
            raise ApiError(422, "webhook_refused", problem, field="webhook")

    def watch(self, job: Job, url: str | None = None, thread_id: str | None = None) -> None:
        """Post `job`'s outcome once it settles, to `url` (which replaces the run's earlier one) or to the
        URL its run was started with; a run without one posts nothing."""
        if url is not None:
            self._subscriptions[job.run_id] = Subscription(
                url, thread_id if thread_id is not None else job.thread
            )
            self._subscriptions.move_to_end(job.run_id)
            while len(self._subscriptions) > MAX_WAITING:
                self._subscriptions.popitem(last=False)
        # the yard's `notify:` may apply too: judged when it settles, as blockyard.yaml is then
        job.result.add_done_callback(lambda _settled: self._settled(job))

    def _settled(self, job: Job) -> None:
        if job.result.cancelled():
            return
        subscription = self._subscriptions.get(job.run_id)
        problem = job.result.exception()
        if problem is not None:
            # the server could not execute it (engine/serve/jobs.py): recorded failed
            result: JsonDict = {
                "status": RunStatus.FAILED,
                "error": f"the server could not execute the run: {type(problem).__name__}",
            }
        else:
            result = job.result.result()
        waiting = result.get("status") == RunStatus.WAITING
        if not waiting:
            # ended: a later resume posts only if given a URL
            self._subscriptions.pop(job.run_id, None)
        urls = [subscription.url] if subscription is not None else []
        subscriptions, allowed = self.notify(job.flow)
        for notify in subscriptions:
            if (
                ("waiting" if waiting else "ended") in notify.on
                and (notify.flows is None or job.flow in notify.flows)
                and refusal(notify.url, allowed) is None  # validate says so first (BY518)
                and notify.url not in urls
            ):
                urls.append(notify.url)
        if not urls:
            return
        thread = subscription.thread_id if subscription is not None else job.thread
        body = payload(job, Subscription("", thread), result)
        for url in urls:
            task = asyncio.get_running_loop().create_task(
                self._deliver(job.run_id, url, body), name=f"webhook-{job.run_id}"
            )
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, run_id: str, url: str, body: JsonDict) -> None:
        settings = self.settings()
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str).encode(
            "utf-8"
        )
        headers = {
            "Content-Type": "application/json",
            DELIVERY: uuid.uuid4().hex,
            "User-Agent": "blockyard-webhooks",
        }
        secret: str | None = None
        if settings.secret_env is not None:
            secret = os.environ.get(settings.secret_env)
            if not secret:
                self.log.error(
                    "webhook_failed",
                    extra=fields(
                        run=run_id,
                        status=body["status"],
                        attempts=0,
                        error=f"server.webhooks.secret_env names {settings.secret_env}, which is not set: "
                        "nothing was sent unsigned",
                    ),
                )
                return
        # redirects are not followed: the host rule holds for the URL given, not for where it points
        async with httpx.AsyncClient(
            timeout=parse_duration(settings.timeout), follow_redirects=False
        ) as client:
            await self._attempts(
                client, run_id, url, body, content, headers, secret, settings.attempts
            )

    async def _attempts(
        self,
        client: httpx.AsyncClient,
        run_id: str,
        url: str,
        body: JsonDict,
        content: bytes,
        headers: dict[str, str],
        secret: str | None,
        attempts: int,
    ) -> None:
        delay = BACKOFF
        outcome = "not sent"
        attempt = 0
        for attempt in range(1, attempts + 1):
            timestamp = str(int(time.time()))
            signed = (
                {TIMESTAMP: timestamp, SIGNATURE: sign(secret, timestamp, content)}
                if secret
                else {}
            )
            began = time.perf_counter()
            try:
                response = await client.post(
                    url, content=content, headers={**headers, **signed, ATTEMPT: str(attempt)}
                )
                outcome = str(response.status_code)
                retry = response.status_code >= 500
                done = response.status_code < 400
            except httpx.HTTPError as exc:
                outcome, retry, done = f"{type(exc).__name__}: {exc}", True, False
            self.log.info(
                "webhook_attempt",
                extra=fields(
                    run=run_id,
                    event=body["event"],
                    attempt=attempt,
                    outcome=outcome,
                    ms=round((time.perf_counter() - began) * 1000, 1),
                ),
            )
            if done:
                self.log.info(
                    "webhook_delivered",
                    extra=fields(run=run_id, status=body["status"], attempts=attempt),
                )
                return
            if not retry or attempt == attempts:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF)
        self.log.warning(
            "webhook_failed",
            extra=fields(run=run_id, status=body["status"], attempts=attempt, error=outcome),
        )

    async def close(self, grace: float) -> None:
        """At shutdown: let the deliveries under way go on for `grace` seconds, then stop them."""
        pending = set(self._deliveries)
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=5.0)
