"""The yard's flows as MCP tools (docs/mcp.md): one tool per flow, and `resume_run` to decide a gate.

A tool's input schema is its flow's inputs (engine/spec/typecheck.py `type_schema`, as the LangGraph API's assistant
schemas have them); calling it starts a run the way `POST /flows/{name}/runs` does (`Server.start_run`: the
inputs checked, the run recorded, queued behind the server's limit) and answers when the run finishes or waits.
A finished run answers its outputs; a run that waits at an approval gate answers its id and gates, and
`resume_run` decides the gate as `POST /runs/{id}/resume` does (`Server.resume_run`). The tool list is the
catalog's at the moment it is asked for, so a flow saved into the yard is a tool at the next listing.

The same MCP server answers at `/mcp` of `blockyard serve` (Streamable HTTP, `handle_http`, behind the server's
Host, token and body-limit checks) and on stdin/stdout for `blockyard mcp` (engine/cli/mcp_stdio.py). This
module imports the `mcp` library (the `mcp` extra): engine/serve/mcp_mount.py loads it at the first request.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import TaskStatus
from mcp.server.lowlevel import Server as McpServer
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from engine.core.errors import BlockyardError
from engine.core.events import RunStatus
from engine.core.values import JsonDict
from engine.core.version import __version__
from engine.serve.bodies import ResumeRequest
from engine.serve.catalog import FlowEntry
from engine.serve.jobs import Job
from engine.serve.problems import ApiError, from_engine
from engine.serve.server import Server
from engine.spec.typecheck import type_schema

RESUME = (
    "resume_run"  # the one tool that is not a flow; a flow of that name is not listed (docs/mcp.md)
)

INSTRUCTIONS = (
    "Each tool runs one flow of a Blockyard yard and answers its outputs. A run that stops at an "
    "approval gate answers `status: waiting` with its run_id and gates: call resume_run with that "
    "run_id and decision approve or reject (and values for the gate's fields) to go on."
)

RESUME_SCHEMA: JsonDict = {
    "type": "object",
    "properties": {
        "run_id": {
            "type": "string",
            "description": "The run that waits (the run_id a flow's tool answered).",
        },
        "decision": {
            "type": "string",
            "enum": ["approve", "reject"],
            "description": "Approve or reject the waiting gate. Without it, a failed or interrupted "
            "run continues from its last checkpoint.",
        },
        "values": {"type": "object", "description": "Values for the gate's fields, by name."},
        "reason": {"type": "string", "description": "Why (recorded in the run's trace)."},
        "gate": {
            "type": "string",
            "description": "Which gate (its step id), when several are waiting.",
        },
    },
    "required": ["run_id"],
    "additionalProperties": False,
}


def build(server: Server) -> McpServer[Any, Any]:
    """The MCP server over `server`'s catalog and job queue (started: `Server.startup` has run)."""
    app: McpServer[Any, Any] = McpServer(
        "blockyard", version=__version__, instructions=INSTRUCTIONS
    )

    @app.list_tools()  # type: ignore[untyped-decorator,no-untyped-call]
    async def list_tools() -> list[types.Tool]:
        return tools(server)

    # the engine checks the inputs itself (Server.start_run), with its own messages
    @app.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: JsonDict | None) -> types.CallToolResult:
        return await call(server, name, arguments or {})

    return app


def tools(server: Server) -> list[types.Tool]:
    """A tool per served flow (read now: hot reload changes the list), then `resume_run`."""
    listed = [
        flow_tool(entry)
        for name, entry in sorted(server.catalog.flows.items())
        if name != RESUME and offered(server, name)
    ]
    listed.append(
        types.Tool(
            name=RESUME,
            title="Resume a run",
            description="Decide the approval gate a flow's run waits at (the run_id and gates a "
            "flow's tool answered with `status: waiting`), and answer as the flow's "
            "tool does: the outputs, or the next gate.",
            inputSchema=RESUME_SCHEMA,
        )
    )
    return listed


def offered(server: Server, name: str) -> bool:
    """Whether flow `name` is a tool: every flow, unless the yard lists them (`server.mcp_flows`)."""
    chosen = server.catalog.server.mcp_flows
    return chosen is None or name in chosen


def flow_tool(entry: FlowEntry) -> types.Tool:
    spec = entry.bundle.flow
    schema: JsonDict = {
        "type": "object",
        "properties": {name: type_schema(t) for name, t in spec.inputs.items()},
        "required": [name for name, t in spec.inputs.items() if not t.has_default],
        "additionalProperties": False,
    }
    about = spec.description.strip() if spec.description else f"Run the flow {entry.name}."
    outputs = ", ".join(spec.outputs) or "none"
    return types.Tool(
        name=entry.name,
        title=entry.name,
        description=f"{about}\n\nRuns the flow '{entry.name}' (version {entry.version}); answers its "
        f"outputs ({outputs}). If it stops at an approval gate, the answer says so: "
        f"decide with {RESUME}.",
        inputSchema=schema,
    )


async def call(server: Server, name: str, arguments: JsonDict) -> types.CallToolResult:
    """Run the flow `name` (or resume a run) and answer how it ended; a refusal is an error result, never a
    traceback."""
    try:
        if name == RESUME:
            return await _resume(server, arguments)
        if not offered(server, name):
            return refused(
                f"flow '{name}' is not offered over MCP (server.mcp_flows in blockyard.yaml lists "
                "the flows that are)"
            )
        entry = server.flow(name)  # 404 unknown_flow: its message says so (and suggests a name)
        job = await server.start_run(entry, arguments)
        return answer(await _outcome(job))
    except ApiError as exc:
        return refused(exc.message)
    except BlockyardError as exc:
        return refused(from_engine(exc).message)


async def _resume(server: Server, arguments: JsonDict) -> types.CallToolResult:
    run_id = arguments.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        return refused("resume_run needs run_id: the run_id a flow's tool answered")
    try:
        body = ResumeRequest.model_validate({k: v for k, v in arguments.items() if k != "run_id"})
    except ValidationError as exc:
        return refused(
            "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        )
    await server.known_run(run_id)
    job = await server.resume_run(run_id, body.resume())
    return answer(await _outcome(job))


async def _outcome(job: Job) -> JsonDict:
    # shield: a client that hangs up must not cancel the run (as POST /flows/{name}/runs)
    result: JsonDict = await asyncio.shield(job.result)
    return result


def answer(result: JsonDict) -> types.CallToolResult:
    """The run's result as the tool's answer: the structured result (run_id, status, outputs, gates) for
    clients that read it, and a text a model reads: the outputs, the gates to decide, or the error."""
    status = result.get("status")
    shown = {
        **result,
        "waiting": [gate(g, result.get("step")) for g in result.get("waiting") or []],
    }
    if status == RunStatus.FINISHED:
        text = json.dumps(result.get("outputs") or {}, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structuredContent=shown
        )
    if status == RunStatus.WAITING:
        gates = "; ".join(_gate_line(g) for g in shown["waiting"]) or "a gate"
        text = (
            f"Run {result['run_id']} of flow {result.get('flow')} waits for a decision at {gates}. "
            f'Call {RESUME} with run_id "{result["run_id"]}" and decision approve or reject'
            + (
                " (and values for the gate's fields)"
                if any(g.get("fields") for g in shown["waiting"])
                else ""
            )
            + " to go on."
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structuredContent=shown
        )
    text = f"Run {result.get('run_id')} of flow {result.get('flow')} {status}: {result.get('error') or 'no error'}"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structuredContent=shown, isError=True
    )


def gate(data: JsonDict, step: str | None) -> JsonDict:
    """An approval_required event's data as a gate: its step, message and fields (what a decision needs)."""
    value = data.get("value")
    shown: JsonDict = {**value} if isinstance(value, dict) else {"message": value}
    shown.setdefault("step", step)
    shown["interrupt_id"] = data.get("interrupt_id")
    return shown


def _gate_line(g: JsonDict) -> str:
    line = f"gate '{g.get('step')}'"
    if g.get("message"):
        line += f" ({g['message']})"
    fields = g.get("fields")
    if isinstance(fields, dict) and fields:
        line += f", fields: {', '.join(fields)}"
    return line


def refused(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


# Host, token and body size are checked by the server's middleware before a request gets here; the library's
# own DNS-rebinding check would only repeat the Host check with a narrower list
NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


async def handle_http(app: McpServer[Any, Any], scope: Scope, receive: Receive, send: Send) -> None:
    """One Streamable HTTP request, stateless and answered as JSON: every request is whole in itself (no
    session to keep across a reload or between replicas), which is all a tool server needs. What the
    library's StreamableHTTPSessionManager does in stateless mode, with a task group of the request's own
    instead of one held for the app's lifetime."""
    transport = StreamableHTTPServerTransport(
        mcp_session_id=None, is_json_response_enabled=True, security_settings=NO_HOST_CHECK
    )

    async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with transport.connect() as (read, write):
            task_status.started()
            await app.run(read, write, app.create_initialization_options(), stateless=True)

    async with anyio.create_task_group() as group:
        await group.start(run)
        try:
            await transport.handle_request(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await transport.terminate()
