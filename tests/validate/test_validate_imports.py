"""`blockyard validate` is the pre-commit path: it must not import LangGraph, LangChain or an LLM client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "langgraph",
    "langchain",
    "openai",
    "anthropic",
    "httpx",
    "fastapi",
    "uvicorn",
    "tiktoken",
)


def _imported_modules(*args: str) -> tuple[int, set[str]]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engine", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return result.returncode, modules


def test_validate_imports_no_llm_stack() -> None:
    code, modules = _imported_modules("validate", "--root", str(REPO))
    assert code == 0
    assert "engine.validate.command" in modules  # the probe sees our own imports
    assert sorted(m for m in modules if m.split(".")[0].startswith(FORBIDDEN)) == []


def test_listings_import_no_llm_stack() -> None:
    for command in ("flows", "blocks"):
        code, modules = _imported_modules(command, "--root", str(REPO))
        assert code == 0
        assert sorted(m for m in modules if m.split(".")[0].startswith(FORBIDDEN)) == [], command


def test_validate_of_a_yard_without_schedules_does_not_import_croniter(tmp_path: Path) -> None:
    # croniter costs ~10 ms to import: the pre-commit path of a yard without schedules doesn't pay it
    (tmp_path / "blocks").mkdir()
    (tmp_path / "flows").mkdir()
    (tmp_path / "blocks/note.yaml").write_text(
        "block: note\ndescription: A note.\nkind: transform\n"
        "outputs:\n  note: {type: string}\ncompute:\n  note: \"'x'\"\n"
    )
    flow = "flow: noted\nsteps:\n  - id: noted\n    uses: note\n"
    (tmp_path / "flows/noted.yaml").write_text(flow)
    code, modules = _imported_modules("validate", "--root", str(tmp_path))
    assert code == 0
    assert "engine.validate.semantic.schedule" in modules  # the probe sees the schedule checks
    assert "croniter" not in modules
