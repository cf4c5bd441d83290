"""Output folders: a flow's `output_dir`, `blockyard run --output DIR` and the Python API's
`output_dir=` name the yard folder a run's file tools write to, confined to the yard; every write
is a `file_written` event, and `blockyard runs show` lists the files a run wrote."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Yard
from engine.core.errors import UsageError
from tests.runtime.conftest import Outcome
from tests.support.coder_yard import CODER_YARD

Cli = Callable[..., Outcome]
MakeYard = Callable[[dict[str, str]], Path]


def test_the_flow_output_dir_holds_the_files_and_each_write_is_an_event(
    make_yard: MakeYard, cli: Cli
) -> None:
    root = make_yard(CODER_YARD)
    done = cli(root, "run", "code", "--json")
    assert done.code == 0, done.err
    events = done.events()
    assert events[0]["data"]["output_dir"] == "output"
    written = [
        (e["step"], e["data"]["path"], e["data"]["bytes"])
        for e in events
        if e["type"] == "file_written"
    ]
    # the agent's two calls of one turn run in parallel: either may be written first
    assert sorted(written) == [("write", "app.py", 12), ("write", "lib/util.py", 6)]
    assert (root / "output" / "app.py").read_text() == "print('hi')\n"
    assert (root / "output" / "lib" / "util.py").read_text() == "X = 1\n"
    assert not (root / ".blockyard" / "workspaces").exists()
    run_id = events[0]["run_id"]
    shown = cli(root, "runs", "show", run_id)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    at = lines.index("files     written to output/")
    assert sorted(lines[at + 1 : at + 3]) == [
        "  app.py       12 bytes by write",
        "  lib/util.py  6 bytes by write",
    ]
    listed = json.loads(cli(root, "runs", "show", run_id, "--json").out)["written"]
    assert listed["folder"] == "output"
    assert sorted(listed["files"], key=lambda entry: entry["path"]) == [
        {"path": "app.py", "bytes": 12, "writes": 1, "step": "write"},
        {"path": "lib/util.py", "bytes": 6, "writes": 1, "step": "write"},
    ]


def test_run_output_overrides_the_flow_and_the_default_stays_the_workspace(
    make_yard: MakeYard, cli: Cli
) -> None:
    root = make_yard(CODER_YARD)
    shown = cli(root, "run", "code", "--output", "./site/v1/")
    assert shown.code == 0
    # progress says what was written
    assert "  write: wrote app.py (12 bytes)" in shown.err.splitlines()
    assert (root / "site" / "v1" / "app.py").is_file()
    assert not (root / "output").exists()
    with Yard.load(root) as yard:
        result = yard.run("gated_code", output_dir="api")
        assert result.status == "waiting"
        plain = yard.run("gated_code")
        yard.resume(plain.run_id, approve=True)
    assert (root / ".blockyard" / "workspaces" / plain.run_id / "app.py").is_file()
    shown = cli(root, "runs", "show", plain.run_id)
    assert f"files     written to the run's workspace (workspaces/{plain.run_id}/)" in shown.out


def test_a_resumed_run_writes_where_it_started(make_yard: MakeYard, cli: Cli) -> None:
    root = make_yard(CODER_YARD)
    started = cli(root, "run", "gated_code", "--output", "built", "--json")
    assert started.code == 3, started.err
    run_id = started.events()[0]["run_id"]
    resumed = cli(root, "resume", run_id, "--approve", "--json")
    assert resumed.code == 0, resumed.err
    (again,) = [e for e in resumed.events() if e["type"] == "run_started"]
    assert again["data"]["output_dir"] == "built"
    assert (root / "built" / "lib" / "util.py").is_file()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "../out",
            "error: --output '../out': it contains '..'; the folder must stay inside the yard",
        ),
        (
            "/tmp/out",
            "error: --output '/tmp/out': it is absolute; name a folder relative to the yard, e.g. output",
        ),
        (
            ".blockyard/x",
            "error: --output '.blockyard/x': it lies inside .blockyard, the state folder; a run writes only "
            "where the engine reads no definitions, code, prompts or configuration: name another folder, "
            "e.g. output",
        ),
        (
            "escape/deeper",
            "error: --output 'escape/deeper' leads outside the yard through a symbolic link",
        ),
    ],
)
def test_an_output_folder_outside_the_yard_is_a_usage_error(
    make_yard: MakeYard, cli: Cli, tmp_path: Path, given: str, message: str
) -> None:
    root = make_yard(CODER_YARD)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "escape")
    done = cli(root, "run", "code", "--output", given)
    assert done.code == 2
    assert done.err.strip().splitlines()[-1] == message
    assert list(outside.iterdir()) == []
    with (
        Yard.load(root) as yard,
        pytest.raises(UsageError, match=re.escape(message.removeprefix("error: "))),
    ):
        yard.run("code", output_dir=given)


def test_a_link_planted_in_place_of_the_folder_is_refused_by_the_file_tools(
    make_yard: MakeYard, cli: Cli, tmp_path: Path
) -> None:
    root = make_yard(CODER_YARD)
    started = cli(root, "run", "gated_code", "--output", "built", "--json")
    run_id = started.events()[0]["run_id"]
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(root / "built", ignore_errors=True)
    os.symlink(outside, root / "built")  # after the run started, before it writes
    resumed = cli(root, "resume", run_id, "--approve", "--json")
    errors = [
        e["data"]["error"]
        for e in resumed.events()
        if e["type"] == "tool_call" and e["data"].get("error")
    ]
    assert errors and all("leads outside the yard" in error for error in errors)
    assert list(outside.iterdir()) == []
