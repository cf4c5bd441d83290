"""How the yard's files are named: `Locations` names them as `located` does, resolving each folder
once per load (resolving a path walks every folder in it, and a yard has many files per folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.definitions.files import Locations, located
from engine.definitions.project import load_project
from engine.validate.command import validate

BLOCK = "block: b{n}\nkind: transform\noutputs:\n  x: {{type: string}}\ncompute:\n  x: \"'x'\"\n"
FLOW = "flow: f{n}\nsteps:\n  - id: s\n    uses: b{n}\n"


def test_locations_names_paths_as_located_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    (real / "flows").mkdir(parents=True)
    (real / "flows/a.yaml").write_text("flow: a\n")
    (tmp_path / "linked").symlink_to(real)  # a folder reached through a link: resolved
    # a link at the file's own name: kept
    (real / "flows/link.yaml").symlink_to(real / "flows/a.yaml")
    monkeypatch.chdir(real)
    paths = [
        real / "flows/a.yaml",
        tmp_path / "linked/flows/a.yaml",
        tmp_path / "linked/flows/link.yaml",
        tmp_path / "linked/flows/missing.yaml",
        Path("flows/a.yaml"),
        Path("./flows/../flows/link.yaml"),
        Path("/"),
        Path("/tmp"),
    ]
    where = Locations()
    for _ in range(2):  # the second time from what it remembers
        assert [where(path) for path in paths] == [located(path) for path in paths]
    assert where(tmp_path / "linked/flows/link.yaml") == real / "flows/link.yaml"


def test_loading_a_yard_resolves_each_folder_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "blocks").mkdir()
    (tmp_path / "flows").mkdir()
    for n in range(20):
        (tmp_path / f"blocks/b{n}.yaml").write_text(BLOCK.format(n=n))
        (tmp_path / f"flows/f{n}.yaml").write_text(FLOW.format(n=n))
    resolved: list[str] = []
    realpath = os.path.realpath

    def counted(path: str | os.PathLike[str], *, strict: bool = False) -> str:
        resolved.append(os.fspath(path))
        return realpath(path, strict=strict)

    monkeypatch.setattr(os.path, "realpath", counted)
    project = load_project(tmp_path)
    assert project.ok and len(project.files) == 40
    # each file is resolved once to be read inside the yard (engine/definitions/files.py, Bounds.resolve); its
    # name as shown needs only its folder, resolved once for all of them
    assert len(resolved) <= 40 + 10, sorted(resolved)
    resolved.clear()
    monkeypatch.chdir(tmp_path)
    report = validate([], None)
    assert report.ok and report.files_checked == 40
    assert len(resolved) <= 40 + 10, sorted(resolved)
