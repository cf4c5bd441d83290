"""Errors of compiling a flow and of running one of its steps."""

from __future__ import annotations

from engine.errors import BlockyardError


class CompileError(BlockyardError):
    """A flow that cannot be turned into a graph; the message names the flow and the step."""

    code = "compile_failed"


class StepFailed(BlockyardError):
    """A step of a run failed. `cause` is the underlying exception (None for checks of our own).

    The message reads "flow 'f', step 's' (block 'b'): reason". Step ids inside subflows are
    prefixed with the calling step ("research.search"); map items add "item N".
    """

    code = "step_failed"

    def __init__(self, flow: str, step: str, block: str | None, reason: str, *,
                 cause: BaseException | None = None, item: int | None = None) -> None:
        self.flow = flow
        self.step = step
        self.block = block
        self.reason = reason
        self.cause = cause
        self.item = item
        where = f"flow '{flow}', step '{step}'"
        if item is not None:
            where += f" item {item}"
        if block is not None:
            where += f" (block '{block}')"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # keyword-only arguments need help to survive pickling (checkpoint serializers, processes)
        return (_rebuild, (self.flow, self.step, self.block, self.reason, self.item))


def _rebuild(flow: str, step: str, block: str | None, reason: str, item: int | None) -> StepFailed:
    return StepFailed(flow, step, block, reason, item=item)


def not_supported(what: str, flow: str, step: str) -> CompileError:
    return CompileError(f"flow '{flow}', step '{step}': {what} not supported yet")


class Problem(Exception):
    """A deterministic failure found by the engine inside a step (bad binding, wrong type, bad
    template): reported as the step's reason and never retried."""
