"""The memory of a run: which scope of the memory store (engine/state/memory.py) it works in.

A flow with `memory: {scope: "users/{{ inputs.user_id }}"}` renders its scope from the run's
inputs. When an execution starts, the scope's preferences and the flow's recent history are
loaded (prompts see them as `user_preferences` and `user_history`); memory_read/memory_write
blocks go through `RunMemory`; when the run ends (finished or failed) one history record —
inputs, outputs, status — is stored under the run id (engine/runtime/end_hooks.py), so a run
that fails and is resumed to its end leaves one record, not two.
"""

from __future__ import annotations

from engine.core.errors import UsageError
from engine.core.events import RunStatus, now_iso
from engine.core.values import JsonDict
from engine.definitions.pinned import Bundle
from engine.state.memory import parse_scope
from engine.state.store import RunRecord
from engine.templates.limits import TemplateLimits, using_limits
from engine.templates.render import TemplateError, render_text


def render_scope(bundle: Bundle, inputs: JsonDict) -> str | None:
    """The run's memory scope (`users/ada`), or None for a flow without `memory:`."""
    memory = bundle.flow.memory
    if memory is None:
        return None
    where = f"flow '{bundle.name}': memory scope"
    try:
        with using_limits(TemplateLimits.of(bundle.config)):
            scope = render_text(memory.scope, {"inputs": inputs}).strip()
    except TemplateError as exc:
        raise UsageError(f"{where}: {exc}") from None
    try:
        parse_scope(scope)
    except UsageError as exc:
        raise UsageError(f"{where} '{memory.scope}': {exc}") from None
    return scope


def history_record(
    run: RunRecord, status: RunStatus, outputs: JsonDict | None, error: str | None
) -> JsonDict:
    """The memory history entry of a run: what went in, what came out, how it ended."""
    return {
        "run_id": run.id,
        "flow": run.flow,
        "version": run.version,
        "status": str(status),
        "inputs": run.inputs,
        "outputs": outputs,
        "error": error,
        "started": run.started,
        "ended": now_iso(),
    }
