"""Errors of compiling a flow and of running one of its steps."""

from __future__ import annotations

from engine.core.errors import BlockyardError


class CompileError(BlockyardError):
    """A validated flow that this installation cannot build: an optional extra it needs is not
    installed, or an artefact it uses no longer fits (a smart block's compiled program). Never a
    rule about what a user may write: those are the validator's, with a code (engine/validate/)."""

    code = "compile_failed"


class InternalError(Exception):
    """A bug: the compiler or an executor met input the validator should have refused, or a state
    the engine never reaches. Not a BlockyardError: the CLI reports it as an internal error (exit 4)."""


def internal(what: str, code: str) -> InternalError:
    """The error for a broken promise of the validator: `what` it let through, `code` the rule that
    should have refused it. The compiler trusts a validated bundle; where it still looks, it says so."""
    return InternalError(f"bug: the validator should have refused {what} ({code})")

    code = "compile_failed"


class StepFailed(BlockyardError):
    """A step of a run failed. `cause` is the underlying exception (None for checks of our own).

    The message reads "flow 'f', step 's' (block 'b'): reason". Step ids inside subflows are
    prefixed with the calling step ("research.search"); map items add "item N".
    """

    code = "step_failed"

    def __init__(
        self,
        flow: str,
        step: str,
        block: str | None,
        reason: str,
        *,
        cause: BaseException | None = None,
        item: int | None = None,
    ) -> None:
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


class Problem(Exception):
    """A deterministic failure found by the engine inside a step (bad binding, wrong type, bad
    template): reported as the step's reason and never retried."""
