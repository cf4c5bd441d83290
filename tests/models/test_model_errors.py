"""is_transient: which failures LangGraph's RetryPolicy may retry, for each `retry.on` kind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import httpx2
import jsonschema
import openai
import pytest
from langgraph.errors import NodeTimeoutError

from engine.core.errors import BlockyardError, ValidationFailed
from engine.models import ModelError, ModelOutputError, is_transient
from engine.tools import ToolError

ALL = ["timeout", "rate_limit", "server_error", "connection"]


def request() -> httpx2.Request:
    return httpx2.Request("POST", "https://api.example/v1/chat/completions")


def status_error(cls: type[openai.APIStatusError], status: int) -> openai.APIStatusError:
    return cls("failed", response=httpx2.Response(status, request=request()), body=None)


def httpx_status(status: int) -> httpx.HTTPStatusError:
    req = httpx.Request("GET", "https://x.example")
    return httpx.HTTPStatusError(
        "failed", request=req, response=httpx.Response(status, request=req)
    )


TRANSIENT: list[tuple[str, Callable[[], BaseException]]] = [
    ("timeout", lambda: openai.APITimeoutError(request=request())),
    ("timeout", lambda: httpx.ReadTimeout("slow")),
    ("timeout", lambda: httpx2.ConnectTimeout("slow")),
    ("timeout", lambda: TimeoutError("slow")),
    ("timeout", lambda: NodeTimeoutError("x", 0.2, kind="run", run_timeout=0.2)),
    ("rate_limit", lambda: status_error(openai.RateLimitError, 429)),
    ("rate_limit", lambda: httpx_status(429)),
    ("server_error", lambda: status_error(openai.InternalServerError, 500)),
    ("server_error", lambda: status_error(openai.APIStatusError, 503)),
    ("server_error", lambda: httpx_status(502)),
    ("connection", lambda: openai.APIConnectionError(request=request())),
    ("connection", lambda: httpx.ConnectError("refused")),
    ("connection", lambda: httpx2.RemoteProtocolError("eof")),
    ("connection", lambda: ConnectionResetError()),
    ("server_error", lambda: ModelError("m", kind="server_error")),
]


@pytest.mark.parametrize(("kind", "make"), TRANSIENT)
def test_each_failure_matches_its_kind_only(kind: str, make: Callable[[], BaseException]) -> None:
    exc = make()
    assert is_transient(exc, [kind])
    assert is_transient(exc, ["any"])
    assert not is_transient(exc, [k for k in ALL if k != kind])
    assert not is_transient(exc, [])


NEVER: list[Callable[[], BaseException]] = [
    lambda: status_error(openai.BadRequestError, 400),
    lambda: status_error(openai.AuthenticationError, 401),
    lambda: status_error(openai.PermissionDeniedError, 403),
    lambda: status_error(openai.NotFoundError, 404),
    lambda: status_error(openai.UnprocessableEntityError, 422),
    lambda: httpx_status(404),
    lambda: ModelError("bad key", status=401),
    lambda: ModelOutputError("did not match"),
    lambda: ToolError("tool 'x' failed"),
    lambda: ValidationFailed([]),
    lambda: BlockyardError("config"),
    lambda: jsonschema.ValidationError("bad"),
]


@pytest.mark.parametrize("make", NEVER)
def test_permanent_failures_are_never_transient(make: Callable[[], BaseException]) -> None:
    assert not is_transient(make(), [*ALL, "any"])


def test_any_retries_unknown_failures() -> None:
    assert is_transient(RuntimeError("flaky"), ["any"])
    assert not is_transient(RuntimeError("flaky"), ALL)


def test_model_error_repr_and_attributes() -> None:
    exc = ModelError(
        "openai model 'm': the server failed",
        provider="openai",
        model="m",
        kind="server_error",
        status=500,
    )
    assert (
        repr(exc)
        == "ModelError(\"openai model 'm': the server failed\", kind='server_error', status=500)"
    )
    assert (exc.provider, exc.model, exc.exit_code) == ("openai", "m", 1)


def test_a_real_node_timeout_is_transient() -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        done: bool

    async def slow(state: State) -> State:
        await asyncio.sleep(5)
        return {"done": True}

    graph = StateGraph(State)
    graph.add_node("slow", slow, timeout=0.05)
    graph.add_edge(START, "slow")
    graph.add_edge("slow", END)
    with pytest.raises(NodeTimeoutError, match="Node 'slow' exceeded its run timeout") as caught:
        asyncio.run(graph.compile().ainvoke({}))
    assert is_transient(caught.value, ["timeout"])
    assert not is_transient(caught.value, ["server_error"])
