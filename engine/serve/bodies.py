"""Request bodies of the HTTP API: their models (shown in the OpenAPI docs at /docs) and how they are read.

Bodies are read by `read_body`, not by FastAPI's body parameters, so a route can first answer
what the path says (an unknown flow is a 404 whatever the body) and then judge the body:
JSON only — whatever `Content-Type` it came with, as LangGraph's server reads it (a proxy may forward JSON
as `text/plain;charset=UTF-8`), except from a browser page on an origin the server does not trust, whose
`text/plain` POST a browser sends without asking first (a cross-site request forgery on a loopback server
without a token) — and only values the engine can store — Python's JSON parser accepts lone UTF-16
surrogates, integers of any size and NaN, which SQLite, the checkpoints or the JSON answers
then choke on. Each refusal is a 422 naming the field.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, TypeVar

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.core.values import JsonDict
from engine.serve.problems import ApiError
from engine.spec.common import Durability
from engine.spec.decisions import APPROVE, chosen

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_DEPTH = 64  # nesting of arrays and objects in one body
SURROGATE = "\\ud800 to \\udfff without its pair"
NOT_AN_OBJECT = "the request body must be a JSON object"
CROSS_ORIGIN = (
    "a page on another origin must send its JSON body with Content-Type: application/json "
    "(or be listed in server.cors_origins)"
)

Body = TypeVar("Body", bound=BaseModel)


class RunRequest(BaseModel):
    """POST /flows/{name}/runs."""

    model_config = ConfigDict(extra="forbid")

    inputs: JsonDict = Field(default_factory=dict, description="The flow's inputs, by name.")
    run_id: str | None = Field(None, description="Id for the run (default: generated).")
    output_dir: str | None = Field(
        None,
        description="Folder of the yard the run's file tools write to, e.g. output "
        "(default: the flow's output_dir, else the run's workspace).",
    )
    durability: Durability | None = Field(
        None,
        description="How the run is checkpointed: sync, async, exit or none (default: the flow's durability, "
        "else blockyard.yaml's, else sync; docs/runtime.md).",
    )
    trace: bool | None = Field(
        None, description="false: record no event trace (only with durability none)."
    )
    webhook: str | None = Field(
        None,
        description="URL POSTed the run (JSON, signed) when it waits at a gate and "
        "when it ends; its host must be in http.allowed_hosts "
        '(docs/serve.md, "Webhooks").',
    )


class ThreadRequest(BaseModel):
    """POST /threads: a conversation thread ahead of its first turn."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="Id for the thread (default: generated).")
    flow: str | None = Field(
        None, description="The flow its turns run (default: named by the first turn)."
    )


class TurnRequest(BaseModel):
    """POST /threads/{id}/runs: the next turn of a conversation."""

    model_config = ConfigDict(extra="forbid")

    inputs: JsonDict = Field(
        default_factory=dict,
        description="The flow's inputs, by name (the turn's message is its `message` input).",
    )
    flow: str | None = Field(
        None, description="The flow to run: needed only while the thread has none."
    )
    run_id: str | None = Field(None, description="Id for the turn's run (default: generated).")


class PlanRunRequest(RunRequest):
    """POST /plans/runs: a TaskPlan (docs/taskplans.md), run at once."""

    plan: JsonDict = Field(
        ..., description="The TaskPlan: {plan_id, user_intent, entry_step_id, steps, ...}."
    )


class ResumeRequest(BaseModel):
    """POST /runs/{id}/resume: a decision for a waiting gate, or nothing to continue a failed or
    interrupted run from its last checkpoint."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"] | None = Field(
        None,
        description="approve or reject the waiting gate (the one shape of a decision: docs/approvals.md).",
    )
    approve: bool | None = Field(
        None, description="Alias of `decision`: true approves, false rejects."
    )
    values: JsonDict = Field(default_factory=dict, description="Values for the gate's fields.")
    reason: str | None = Field(None, description="Why (recorded in the trace).")
    gate: str | None = Field(None, description="Which gate, when several are waiting.")
    actor: str | None = Field(
        None, description="Who decides (checked against the gate's approvers)."
    )
    budget: JsonDict | None = Field(
        None,
        description='Raised limits of the run\'s budget, kept with the run: {"tokens": 50000, "per_turn": '
        '{"cost_usd": 0.5}} (docs/observability.md, "Budgets").',
    )

    def chosen(self) -> str | None:
        """approve, reject or None (no decision); DecisionRefused (422) when `decision` and `approve` disagree."""
        return chosen(self.decision, self.approve)

    def resume(self) -> JsonDict:
        """What the server resumes the run with: the decision (as `approve`), or nothing."""
        word = self.chosen()
        raised = {"budget": self.budget} if self.budget else {}
        if word is None:
            return raised
        return {
            "approve": word == APPROVE,
            "values": self.values or None,
            "reason": self.reason,
            "gate": self.gate,
            "actor": self.actor,
            **raised,
        }


def openapi_body(model: type[BaseModel]) -> JsonDict:
    """`openapi_extra` documenting the optional JSON body a route reads with `read_body`."""
    return {
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


async def read_body(request: Request, model: type[Body]) -> Body | None:
    """The body as `model`, None when empty; 400 for bad JSON, 422 for anything else wrong."""
    data = await _json_body(request)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_request", NOT_AN_OBJECT)
    check_value(data, "")
    return _validated(model, data, "body")


async def read_body_list(request: Request, model: type[Body], most: int) -> list[Body] | None:
    """A body that is a JSON array of `model`s (at most `most`), None when empty; refused as read_body refuses."""
    data = await _json_body(request)
    if data is None:
        return None
    if not isinstance(data, list):
        raise ApiError(422, "invalid_request", "the request body must be a JSON array")
    if len(data) > most:
        raise ApiError(
            422, "invalid_request", f"the request body lists {len(data)} items; at most {most}"
        )
    check_value(data, "")
    found = []
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise ApiError(422, "invalid_request", f"body.{index}: must be a JSON object")
        found.append(_validated(model, item, f"body.{index}"))
    return found


def _validated(model: type[Body], data: JsonDict, where: str) -> Body:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join((where, *(_shown(str(p)) for p in e['loc'])))}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ApiError(422, "invalid_request", "; ".join(problems)) from None


async def _json_body(request: Request) -> Any:
    """The body's JSON value, None when empty or `null`; 400 for bad JSON, 422 for a body not sent as JSON."""
    raw = await request.body()  # BodyLimitMiddleware has capped its size
    if not raw.strip():
        return None
    declared = _is_json(request.headers.get("content-type", ""))
    if not declared and not _trusted_origin(request):
        raise ApiError(422, "invalid_request", CROSS_ORIGIN)
    try:
        data = json.loads(raw)
    except (
        RecursionError,
        ValueError,
    ) as exc:  # JSONDecodeError; UnicodeDecodeError for bytes not UTF-8
        if not declared:  # not said to be JSON, and it is not: the body is of another kind
            raise ApiError(422, "invalid_request", NOT_AN_OBJECT) from None
        detail = (
            "nested too deeply"
            if isinstance(exc, RecursionError)
            else exc.msg
            if isinstance(exc, json.JSONDecodeError)
            else "it is not UTF-8"
        )
        raise ApiError(
            400, "malformed_json", f"the request body is not valid JSON: {detail}"
        ) from None
    return data  # `null` is as good as no body


def check_value(value: Any, path: str, depth: int = 0) -> None:
    """Refuse what JSON parsing lets through but the engine cannot keep: 422 naming the field."""
    if depth > MAX_DEPTH:
        _refuse(path, f"the value is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if not _encodable(value):
            _refuse(
                path,
                f"the text holds a lone UTF-16 surrogate ({SURROGATE}), which is not valid Unicode",
            )
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            _refuse(path, f"the integer is beyond 64 bits (from {INT64_MIN} to {INT64_MAX})")
    elif isinstance(value, float):
        if not math.isfinite(value):
            _refuse(
                path,
                "the number is not finite (NaN, Infinity and numbers beyond 1.8e308 are not JSON values)",
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_shown(key)}" if path else _shown(key)
            if not _encodable(key):
                _refuse(
                    where,
                    f"the key holds a lone UTF-16 surrogate ({SURROGATE}), which is not valid Unicode",
                )
            check_value(item, where, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_value(item, f"{path}[{index}]", depth + 1)


def _refuse(path: str, problem: str) -> None:
    field = path or "body"
    raise ApiError(422, "invalid_request", f"{field}: {problem}", field=field)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(key: str) -> str:
    """A key as it can be printed (and sent back as JSON): surrogates escaped, long keys cut."""
    text = key.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 80 else text[:77] + "..."


def _trusted_origin(request: Request) -> bool:
    """Whether a body not typed as JSON may be read: no browser page sent it (no `Origin`: curl, a proxy's
    server-side fetch), or the server's own page did, or a page of `server.cors_origins`. A browser sends
    a cross-origin POST of `text/plain` without a preflight, so on a loopback server without a token any
    web page could otherwise start runs; `application/json` from another origin needs the preflight the
    CORS list answers."""
    origin = request.headers.get("origin")
    if origin is None or origin == f"{request.url.scheme}://{request.headers.get('host', '')}":
        return True
    server = getattr(request.app.state, "server", None)
    trusted = server.catalog.server.cors_origins if server is not None else ()
    return origin in trusted


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
