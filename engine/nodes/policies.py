"""Retries and timeouts of block steps.

Retries are LangGraph `RetryPolicy`s on the step's node. Model blocks without a `retry:` get
three attempts on transient failures. Nodes raise `StepFailed`; the predicate looks at its
`cause` (None for the engine's own deterministic checks, which are never retried).

Timeouts are enforced inside the node (`asyncio.timeout`) rather than by LangGraph's
`TimeoutPolicy`: LangGraph raises its NodeTimeoutError outside the node, where the step can
neither emit `step_failed` nor name its flow and block — and in a map the wait for a
`max_concurrency` slot must not count against the block's time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langgraph.types import RetryPolicy

from engine.models.errors import is_transient
from engine.nodes.errors import StepFailed
from engine.spec import MODEL_KINDS, BlockSpec, RetrySpec, parse_duration


@dataclass(frozen=True)
class Policies:
    retry: RetryPolicy | None
    timeout: float | None

    @property
    def attempts(self) -> int:
        return self.retry.max_attempts if self.retry is not None else 1

    def will_retry(self, exc: StepFailed, attempt: int) -> bool:
        """Whether LangGraph will run the node again after attempt number `attempt` raised `exc`."""
        if self.retry is None or attempt >= self.retry.max_attempts:
            return False
        retry_on = self.retry.retry_on
        return (
            bool(retry_on(exc)) if callable(retry_on) and not isinstance(retry_on, type) else False
        )


def policies(block: BlockSpec) -> Policies:
    spec = block.retry
    if spec is None and block.kind in MODEL_KINDS:
        spec = RetrySpec()
    retry = None
    if spec is not None and spec.attempts > 1:
        retry = RetryPolicy(
            max_attempts=spec.attempts,
            initial_interval=parse_duration(spec.initial),
            backoff_factor=spec.backoff,
            jitter=False,
            retry_on=transient(spec.on),
        )
    timeout = parse_duration(block.timeout) if block.timeout is not None else None
    return Policies(retry, timeout)


def transient(kinds: Sequence[str]) -> Callable[[BaseException], bool]:
    """The retry predicate for `retry.on` kinds, over the StepFailed our nodes raise."""
    wanted = tuple(kinds)

    def retry_on(exc: BaseException) -> bool:
        cause = exc.cause if isinstance(exc, StepFailed) else exc
        if cause is None:
            return False
        return is_transient(cause, wanted)

    return retry_on
