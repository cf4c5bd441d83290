"""Request bodies of the LangGraph Server API. Clients send keys this server does not act on (LangSmith
tracing, durability, ...): those are accepted and ignored, as docs/langgraph-api.md lists."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core.values import JsonDict

StreamModes = str | list[str]


class Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class CommandBody(Lenient):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(Lenient):
    assistant_id: str
    input: JsonDict | None = None
    command: CommandBody | None = None
    stream_mode: StreamModes = Field(default_factory=lambda: ["values"])
    metadata: JsonDict | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "reject"
    if_not_exists: Literal["create", "reject"] = "reject"
    interrupt_before: Any = None
    interrupt_after: Any = None
    # the thread's checkpoint a turn starts from (engine/serve/langgraph_api/branching.py)
    checkpoint_id: str | None = None
    checkpoint: JsonDict | None = None
    webhook: str | None = None  # told when the run waits or ends (engine/serve/webhooks.py)


class ThreadCreate(Lenient):
    thread_id: str | None = None
    metadata: JsonDict | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = None


class ThreadPatch(Lenient):
    metadata: JsonDict = Field(default_factory=dict)


class ThreadSearch(Lenient):
    metadata: JsonDict | None = None
    values: JsonDict | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    ids: list[str] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


class HistoryRequest(Lenient):
    limit: int = Field(10, ge=1, le=1000)
    before: str | JsonDict | None = None
    checkpoint: JsonDict | None = None


class CheckpointRequest(Lenient):
    checkpoint: JsonDict


class AssistantSearch(Lenient):
    metadata: JsonDict | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class StorePut(Lenient):
    namespace: list[str]
    key: str = Field(..., min_length=1)
    value: JsonDict


class StoreDelete(Lenient):
    namespace: list[str]
    key: str = Field(..., min_length=1)


class StoreSearch(Lenient):
    namespace_prefix: list[str] = Field(default_factory=list)
    filter: JsonDict | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    query: str | None = None


class NamespaceSearch(Lenient):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(None, ge=1)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def modes(given: StreamModes | None) -> list[str]:
    """Stream modes as a list (a client may send one as a string)."""
    if given is None:
        return ["values"]
    return [given] if isinstance(given, str) else list(given)


class BatchRun(RunCreate):
    """One run of POST /runs/batch: without `thread_id` a run without a thread, with one a run on that thread."""

    thread_id: str | None = None


class CancelMany(Lenient):
    """POST /runs/cancel: the runs `run_ids` (of `thread_id`, if given), or every run in `status`."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


class ThreadPrune(Lenient):
    thread_ids: list[str]
    strategy: Literal["delete", "keep_latest"] = "delete"


class CronCreate(Lenient):
    assistant_id: str
    schedule: str
    timezone: str | None = None
    input: JsonDict | None = None
    metadata: JsonDict | None = None
    webhook: str | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] | None = None
    end_time: str | None = None
    enabled: bool = True
    config: JsonDict | None = None
    context: JsonDict | None = None


class CronPatch(Lenient):
    schedule: str | None = None
    timezone: str | None = None
    end_time: str | None = None
    enabled: bool | None = None
    input: JsonDict | None = None
    metadata: JsonDict | None = None


class CronSearch(Lenient):
    assistant_id: str | None = None
    thread_id: str | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
