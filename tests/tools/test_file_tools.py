"""read_file, write_file, list_files: confined to the run's workspace, bounded in size."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ConfigSpec
from engine.tools import ToolError, ToolRegistry, build_registry
from engine.tools.builtin import files


@pytest.fixture
def space(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def tools(space: Path, tmp_path: Path) -> ToolRegistry:
    return build_registry(ConfigSpec(), tmp_path, workspace=space)


def run(tools: ToolRegistry, name: str, **args: Any) -> Any:
    return asyncio.run(tools.call(name, args))


def test_write_read_and_list(tools: ToolRegistry, space: Path) -> None:
    assert run(tools, "write_file", path="notes/today.txt", content="ünïcode") == {
        "path": "notes/today.txt",
        "bytes": 9,
    }
    run(tools, "write_file", path="notes/today.txt", content="!", append=True)
    run(tools, "write_file", path="top.md", content="# hi")
    assert (space / "notes" / "today.txt").read_text() == "ünïcode!"
    assert run(tools, "read_file", path="notes/today.txt") == {
        "path": "notes/today.txt",
        "content": "ünïcode!",
        "truncated": False,
    }
    assert run(tools, "read_file", path="top.md", max_bytes=2) == {
        "path": "top.md",
        "content": "# ",
        "truncated": True,
    }
    assert run(tools, "list_files") == {
        "entries": [
            {"path": "notes", "type": "dir"},
            {"path": "top.md", "type": "file", "size": 4},
        ],
        "truncated": False,
    }
    assert run(tools, "list_files", recursive=True)["entries"] == [
        {"path": "notes", "type": "dir"},
        {"path": "notes/today.txt", "type": "file", "size": 10},
        {"path": "top.md", "type": "file", "size": 4},
    ]


@pytest.mark.parametrize("path", ["../outside.txt", "notes/../../outside.txt", "..", "a/..\\..\\b"])
def test_dot_dot_is_refused(tools: ToolRegistry, path: str) -> None:
    for name, extra in (("read_file", {}), ("write_file", {"content": "x"}), ("list_files", {})):
        with pytest.raises(
            ToolError, match=re.escape("contains '..'; it must stay inside the workspace")
        ):
            run(tools, name, path=path, **extra)


@pytest.mark.parametrize("path", ["/etc/passwd", "C:\\Windows\\win.ini", "\\\\server\\share"])
def test_absolute_paths_are_refused(tools: ToolRegistry, path: str) -> None:
    with pytest.raises(
        ToolError, match=re.escape("is absolute; use a path relative to the workspace")
    ):
        run(tools, "read_file", path=path)


def test_symlinks_leading_outside_are_refused(
    tools: ToolRegistry, space: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    (tmp_path / "outside").mkdir()
    os.symlink(secret, space / "link.txt")
    os.symlink(tmp_path / "outside", space / "door")
    os.symlink(space / "inner.txt", space / "inner-link.txt")
    (space / "inner.txt").write_text("fine")

    with pytest.raises(ToolError, match=re.escape("path 'link.txt' leads outside the workspace")):
        run(tools, "read_file", path="link.txt")
    with pytest.raises(
        ToolError, match=re.escape("path 'door/new.txt' leads outside the workspace")
    ):
        run(tools, "write_file", path="door/new.txt", content="escape")
    with pytest.raises(ToolError, match=re.escape("path 'door' leads outside the workspace")):
        run(tools, "list_files", path="door")
    assert not (tmp_path / "outside" / "new.txt").exists()
    assert run(tools, "read_file", path="inner-link.txt")["content"] == "fine"
    listed = {e["path"]: e["type"] for e in run(tools, "list_files", recursive=True)["entries"]}
    assert listed["door"] == "link" and listed["link.txt"] == "link"  # listed, never followed


def test_sizes_are_bounded(tools: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "WRITE_LIMIT", 10)
    with pytest.raises(ToolError, match=re.escape("content is 11 bytes; the limit is 10")):
        run(tools, "write_file", path="big.txt", content="x" * 11)
    with pytest.raises(
        ToolError, match=re.escape("at 'max_bytes': 0 is less than the minimum of 1")
    ):
        run(tools, "read_file", path="a.txt", max_bytes=0)


def test_listing_is_bounded(
    tools: ToolRegistry, space: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "LIST_LIMIT", 3)
    for i in range(5):
        (space / f"f{i}.txt").write_text("")
    listed = run(tools, "list_files")
    assert [e["path"] for e in listed["entries"]] == ["f0.txt", "f1.txt", "f2.txt"]
    assert listed["truncated"] is True


def test_missing_things(tools: ToolRegistry, space: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ToolError, match=re.escape("tool 'read_file': no file 'nope.txt' in the workspace")
    ):
        run(tools, "read_file", path="nope.txt")
    with pytest.raises(
        ToolError, match=re.escape("tool 'list_files': no folder 'nope' in the workspace")
    ):
        run(tools, "list_files", path="nope")
    (space / "dir").mkdir()
    with pytest.raises(ToolError, match=re.escape("tool 'write_file': 'dir' is a folder")):
        run(tools, "write_file", path="dir", content="x")
    fresh = build_registry(ConfigSpec(), tmp_path, workspace=tmp_path / "not-created-yet")
    assert run(fresh, "list_files") == {"entries": [], "truncated": False}
    run(fresh, "write_file", path="first.txt", content="made the folder")
    assert (tmp_path / "not-created-yet" / "first.txt").exists()
