"""Errors carry one row of a table: the CLI's exit code, the server's HTTP status and a stable code."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from starlette.requests import Request

from engine.agents.plan import AgentFailed
from engine.cli import main
from engine.core.errors import BlockyardError, RunError, UsageError, ValidationFailed
from engine.models.errors import ModelError, ModelOutputError
from engine.nodes.errors import CompileError, StepFailed
from engine.serve.problems import engine_error, from_engine
from engine.spec.decisions import DecisionRefused
from engine.spec.typecheck import InputError
from engine.state.database import StateError, StateLocked
from engine.tools.errors import ToolError

TABLE: list[tuple[BlockyardError, int, int, str]] = [
    (BlockyardError("x"), 1, 500, "engine_error"),
    (UsageError("x"), 2, 422, "invalid_request"),
    (InputError("x"), 2, 422, "invalid_request"),
    (DecisionRefused("x"), 2, 422, "invalid_request"),
    (ValidationFailed([]), 1, 500, "validation_failed"),
    (RunError("x"), 1, 500, "run_failed"),
    (StepFailed("f", "s", None, "x"), 1, 500, "step_failed"),
    (CompileError("x"), 1, 500, "compile_failed"),
    (ModelError("x"), 1, 500, "model_failed"),
    (ModelOutputError("x"), 1, 500, "model_output_invalid"),
    (ToolError("x"), 1, 500, "tool_failed"),
    (AgentFailed("x"), 1, 500, "agent_failed"),
    (StateError("x"), 1, 500, "state_unusable"),
    (StateLocked(Path("state.db"), 1.0), 1, 500, "state_locked"),
]


@pytest.mark.parametrize(
    ("error", "exit_code", "status", "code"), TABLE, ids=lambda v: type(v).__name__
)
def test_each_error_class_declares_its_exit_code_http_status_and_code(
    error: BlockyardError, exit_code: int, status: int, code: str
) -> None:
    assert (error.exit_code, error.http_status, error.code) == (exit_code, status, code)
    problem = from_engine(error)
    assert (problem.status, problem.code, problem.message) == (status, code, str(error))


def test_the_server_answers_an_engine_error_from_its_table() -> None:
    request = Request({"type": "http", "method": "POST", "path": "/runs", "headers": []})
    response = asyncio.run(engine_error(request, UsageError("unknown flow 'helo'")))
    assert response.status_code == 422
    assert json.loads(bytes(response.body)) == {
        "error": {"code": "invalid_request", "message": "unknown flow 'helo'"}
    }


def test_the_cli_exits_with_the_code_of_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--root", str(tmp_path / "nowhere")]) == UsageError.exit_code
    assert capsys.readouterr().err.startswith("error: ")
