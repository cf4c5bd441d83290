"""LangGraph's shapes of Blockyard's records: assistants (flows), threads and runs, and their statuses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypedDict

from engine.core.events import RunStatus
from engine.core.values import JsonDict, JsonValue
from engine.serve.catalog import FlowEntry

# The shapes of LangGraph's Agent Server API that Blockyard answers with (as its SDKs type them), so that
# what a route returns is checked where it is built. Values, metadata and messages are JSON data.


class Interrupt(TypedDict):
    """A waiting approval gate as an interrupt: `value` is what the gate asks (engine/.../interrupts.py)."""

    value: JsonDict
    id: str


class Checkpoint(TypedDict):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None
    checkpoint_map: JsonDict | None


class Task(TypedDict):
    """A gate the thread waits at, or the step a failed turn failed in."""

    id: str
    name: str
    error: str | None
    interrupts: list[Interrupt]
    checkpoint: Checkpoint | None
    state: None
    result: JsonValue


class ThreadState(TypedDict):
    """The state at one of a thread's checkpoints (GET /threads/{id}/state, .../history)."""

    values: JsonDict
    next: list[str]
    tasks: list[Task]
    checkpoint: Checkpoint | None
    metadata: JsonDict
    created_at: str
    parent_checkpoint: Checkpoint | None
    interrupts: list[Interrupt]


class Assistant(TypedDict):
    """A served flow as an assistant (GET /assistants/{id}, POST /assistants/search)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    version: int
    config: JsonDict
    context: JsonDict
    metadata: JsonDict
    created_at: str
    updated_at: str


class Run(TypedDict):
    """A run as LangGraph shows one (POST /threads/{id}/runs, GET /threads/{id}/runs/{run_id})."""

    run_id: str
    thread_id: str | None
    assistant_id: str
    created_at: str
    updated_at: str
    status: str
    metadata: JsonDict
    multitask_strategy: str
    kwargs: JsonDict


class Thread(TypedDict):
    """A thread as LangGraph shows one (POST /threads, GET /threads/{id}, POST /threads/search)."""

    thread_id: str
    created_at: str
    updated_at: str
    metadata: JsonDict
    status: str
    values: JsonDict
    interrupts: dict[str, list[Interrupt]]
    config: JsonDict


# A Blockyard run status as a LangGraph run status; a run waiting at an approval gate is `interrupted`.
RUN_STATUS: dict[str, str] = {
    RunStatus.QUEUED: "pending",
    RunStatus.RUNNING: "running",
    RunStatus.FINISHED: "success",
    RunStatus.FAILED: "error",
    RunStatus.WAITING: "interrupted",
    RunStatus.INTERRUPTED: "interrupted",
}
# The LangGraph run statuses a `status` filter may name, as Blockyard statuses.
RUN_STATUS_FILTER: dict[str, tuple[str, ...]] = {
    "pending": (RunStatus.QUEUED,),
    "running": (RunStatus.RUNNING,),
    "success": (RunStatus.FINISHED,),
    "error": (RunStatus.FAILED,),
    "interrupted": (RunStatus.WAITING, RunStatus.INTERRUPTED),
    "timeout": (),
}
EPOCH = "1970-01-01T00:00:00+00:00"


def iso(value: str | None) -> str:
    """A Blockyard time (ISO-8601 UTC with a `Z`) in the `+00:00` form Python's `fromisoformat` reads everywhere."""
    return (value or EPOCH).replace("Z", "+00:00")


def loaded_at(entry: FlowEntry) -> str:
    return datetime.fromtimestamp(entry.loaded_at, UTC).isoformat()


def assistant(entry: FlowEntry) -> Assistant:
    """A served flow as an assistant: its id and graph are the flow's name, its version the flow's version, and
    the definition hash (digest) is in its metadata."""
    spec = entry.bundle.flow
    when = loaded_at(entry)
    return {
        "assistant_id": entry.name,
        "graph_id": entry.name,
        "name": entry.name,
        "description": spec.description,
        "version": entry.version,
        "config": {},
        "context": {},
        "metadata": {
            "digest": entry.digest,
            "file": entry.file,
            "tags": list(spec.tags),
            "created_by": "system",
        },
        "created_at": when,
        "updated_at": when,
    }


def thread_status(last_status: str | None, busy: bool) -> str:
    """idle, busy, interrupted (its last turn waits at a gate) or error (its last turn failed)."""
    if busy or last_status in (RunStatus.RUNNING, RunStatus.QUEUED):
        return "busy"
    if last_status == RunStatus.WAITING:
        return "interrupted"
    if last_status == RunStatus.FAILED:
        return "error"
    return "idle"


def run(record: JsonDict, thread_id: str | None, multitask_strategy: str = "reject") -> Run:
    """A run row (GET /runs/{id} of Blockyard, or a job's summary) as a LangGraph run."""
    status = str(record.get("status") or RunStatus.QUEUED)
    created = iso(record.get("created"))
    return {
        "run_id": record["id"],
        "thread_id": thread_id,
        "assistant_id": record["flow"],
        "created_at": created,
        "updated_at": iso(record.get("finished") or record.get("started"))
        if record.get("finished") or record.get("started")
        else created,
        "status": RUN_STATUS.get(status, "error"),
        "metadata": {"flow_version": record.get("version")},
        "multitask_strategy": multitask_strategy,
        "kwargs": {"input": record.get("inputs") or {}},
    }
