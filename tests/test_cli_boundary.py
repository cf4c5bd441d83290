from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

import pytest

import engine.cli.catalog
from engine.cli import main
from engine.core import extras
from engine.core.errors import BlockyardError


def test_an_unexpected_error_exits_4_with_one_line_and_a_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(root: Path) -> int:
        raise KeyError("surprise")

    monkeypatch.setattr(engine.cli.catalog, "flows_command", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "flows").mkdir()  # a yard, or the command would be refused before it starts
    assert main(["flows", "--root", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert err.startswith("internal error: KeyError: 'surprise'; details in ")
    assert "Traceback" not in err
    assert "Traceback" in (tmp_path / "blockyard-crash.log").read_text()


def test_an_expected_error_is_one_line_with_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(root: Path) -> int:
        raise BlockyardError("flow 'x' is broken")

    monkeypatch.setattr(engine.cli.catalog, "flows_command", refuse)
    (tmp_path / "flows").mkdir()
    assert main(["flows", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "error: flow 'x' is broken\n"


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["flwos"]) == 2
    assert "flwos" in capsys.readouterr().err


def test_a_command_whose_runtime_is_not_installed_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The core alone (pre-commit's install) lacks the runtime: `serve` says so, exit 2, no traceback.
    None in sys.modules makes `import uvicorn` fail as it does where uvicorn is not installed; the
    core-only install itself is tests/test_packaging.py's."""
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    (tmp_path / "flows").mkdir()
    assert main(["serve", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"error: blockyard serve needs the engine's runtime, and {extras.missing('run')}\n"
    )
    assert err.startswith(
        "error: blockyard serve needs the engine's runtime, and the run extra is not installed: "
        "pip install 'aiosqlite>=0.20' 'anyio<5,>=4.10' 'fastapi>=0.115' "
    )


def test_a_postgres_database_without_its_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`database:` on Postgres with psycopg not installed (the `postgres` extra): one line, exit 2."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg had never been installed
    # imported afresh: it imports psycopg
    monkeypatch.delitem(sys.modules, "engine.state.postgres", raising=False)
    monkeypatch.setenv("BLOCKYARD_DATABASE_URL", "postgresql://u:secret@127.0.0.1:9/x")
    (tmp_path / "flows").mkdir()
    assert main(["runs", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: blockyard runs: its state database is on Postgres, and the postgres extra is not installed: "
        "pip install 'langgraph-checkpoint-postgres>=3.0' 'psycopg[binary]>=3.2' 'psycopg-pool>=3.2'\n"
    )


def test_a_missing_module_that_is_not_the_runtime_is_a_bug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(root: Path) -> int:
        importlib.import_module("blockyard_no_such_module")
        return 0

    monkeypatch.setattr(engine.cli.catalog, "flows_command", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "flows").mkdir()
    assert main(["flows", "--root", str(tmp_path)]) == 4
    assert capsys.readouterr().err.startswith(
        "internal error: ModuleNotFoundError: No module named 'blockyard_no_such_module'"
    )
