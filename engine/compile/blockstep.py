"""A step that runs a block (`uses:`): bind inputs, run the kind's executor, check the outputs,
write them (renamed) into the context, and report progress and failures as events."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import StreamWriter

import engine.executors as executors
from engine.core.errors import BlockyardError
from engine.core.values import JsonDict
from engine.executors import BlockCall
from engine.models.calls import recording
from engine.nodes.context import RunContext
from engine.nodes.errors import Problem, StepFailed
from engine.nodes.events import (
    FILE_WRITTEN,
    STEP_FAILED,
    STEP_FINISHED,
    STEP_STARTED,
    emit,
    warning,
)
from engine.nodes.policies import Policies, policies
from engine.nodes.scope import Binder, Frame, OutputCheck
from engine.nodes.spend import StepCalls
from engine.spec import BlockSpec
from engine.spec.block import MODEL_KINDS
from engine.templates.render import prompt_files
from engine.tools.builtin.files import writes


class BlockStep:
    """Everything needed to run one block at one step, prepared at compile time."""

    def __init__(
        self,
        flow: str,
        step: str,
        label: str,
        block: BlockSpec,
        bindings: Mapping[str, Any],
        frames: tuple[Frame, ...],
        renames: Mapping[str, Any],
        executor: executors.Executor | None = None,
        files: Mapping[str, str] | None = None,
    ) -> None:
        """`executor` replaces the kind's own (agent and smart blocks, which the compiler wires);
        `files` are the prompt files pinned with the flow, which its prompts may include."""
        where = f"flow '{flow}', step '{step}'"
        self.flow = flow
        self.step = step
        self.label = label
        self.block = block
        self.binder = Binder(block.inputs, bindings, frames)
        self.check_outputs = OutputCheck(block.outputs)
        self.executor = executor if executor is not None else executors.prepare(block, where)
        self.policies: Policies = policies(block)
        self.files: Mapping[str, str] = files or {}
        # its model calls are recorded (engine/nodes/spend.py)
        self.calls_models = block.kind in MODEL_KINDS
        # whether the run may wait for a person inside the block (an agent's `approve_tools`, a
        # delegate that waits): its step is then a node of its own, never run inline
        self.pauses: bool = getattr(self.executor, "pauses", False)

    async def run(
        self,
        scope: Mapping[str, Any],
        runtime: Runtime[RunContext],
        index: int | None = None,
        transcript: list[Any] | None = None,
    ) -> JsonDict:
        """The block's checked outputs; StepFailed (after a `step_failed` event) when it fails.
        An agent block appends its conversation to `transcript` when one is given."""
        writer = runtime.stream_writer
        info = runtime.execution_info
        attempt = info.node_attempt if info is not None else 1
        started = time.monotonic()
        data: JsonDict = {"block": self.block.block, "kind": self.block.kind}
        if attempt > 1:
            data["attempt"] = attempt
        try:
            inputs = self.binder.bind(scope)
        except Problem as exc:
            emit(writer, STEP_STARTED, self.label, data, index)
            raise self._failed(writer, str(exc), None, started, attempt, index) from None
        emit(writer, STEP_STARTED, self.label, {**data, "inputs": inputs}, index)
        call = BlockCall(
            self.flow,
            self.step,
            self.label,
            self.block,
            inputs,
            runtime.context,
            writer,
            index,
            scope,
            transcript,
        )
        try:
            # an API key a model (or a tool) echoed stops here: it never reaches the state
            raw = runtime.context.secrets.value(await self._execute(call))
            if transcript:
                transcript[:] = runtime.context.secrets.value(transcript)
            outputs = self.check_outputs(raw)
        except GraphBubbleUp:
            raise  # interrupts and parent commands are LangGraph's control flow, not failures
        except Problem as exc:
            raise self._failed(
                writer, str(exc), None, started, attempt, index, call.report
            ) from None
        except TimeoutError as exc:
            reason = (
                f"timed out after {self.block.timeout}"
                if getattr(exc, "blockyard_timeout", False)
                else _reason(exc)
            )
            raise self._failed(writer, reason, exc, started, attempt, index, call.report) from exc
        except Exception as exc:
            raise self._failed(
                writer, _reason(exc), exc, started, attempt, index, call.report
            ) from exc
        emit(
            writer,
            STEP_FINISHED,
            self.label,
            {
                "block": self.block.block,
                "outputs": outputs,
                "duration_ms": _ms(started),
                **call.report,
            },
            index,
        )
        return outputs

    async def _execute(self, call: BlockCall) -> Any:
        def written(path: str, size: int) -> None:
            emit(
                call.writer,
                FILE_WRITTEN,
                call.label,
                {"path": path, "bytes": size, "block": self.block.block},
                call.index,
            )

        if not self.calls_models:
            # a tool or transform: no recorder to install (a chain's steps stay cheap)
            with prompt_files(self.files), writes(written):
                return await self._limited(call)
        calls = StepCalls(call.context.spend, call.writer, call.label, call.index)
        with prompt_files(self.files), writes(written), recording(calls):
            return await self._limited(call)

    async def _limited(self, call: BlockCall) -> Any:
        timeout = self.policies.timeout
        if timeout is None:
            return await self.executor(call)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self.executor(call)
        except TimeoutError as exc:
            if deadline.expired():  # ours, not a timeout the block itself ran into
                exc.blockyard_timeout = True  # type: ignore[attr-defined]
            raise

    def _failed(
        self,
        writer: StreamWriter,
        reason: str,
        cause: BaseException | None,
        started: float,
        attempt: int,
        index: int | None,
        report: Mapping[str, Any] | None = None,
    ) -> StepFailed:
        failed = StepFailed(
            self.flow, self.label, self.block.block, reason, cause=cause, item=index
        )
        if self.policies.will_retry(failed, attempt):
            warning(
                writer,
                self.label,
                "retrying",
                f"attempt {attempt} of {self.policies.attempts} failed: {reason}; retrying",
                block=self.block.block,
                attempt=attempt,
                **({"index": index} if index is not None else {}),
            )
        else:
            emit(
                writer,
                STEP_FAILED,
                self.label,
                {
                    "block": self.block.block,
                    "error": reason,
                    "duration_ms": _ms(started),
                    "attempt": attempt,
                    **(report or {}),
                },
                index,
            )
        return failed


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BlockyardError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
