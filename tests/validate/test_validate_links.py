"""Symbolic links and special files in a yard: nothing outside the yard is ever read or printed.

A pull request can store a symlink; CI then runs `blockyard validate --format github`, whose
annotations are public. Each case builds a real yard with real links on disk and runs the command.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.definitions.project import load_project
from engine.validate.command import validate, validate_command
from tests.conftest import skip_or_fail

FORMATS = ("text", "json", "github", "sarif")
SECRET = "ghp_SECRETTOKEN42"
# shaped like a credentials file (gh's hosts.yml): a mapping, so the old loader quoted its keys back
SECRET_FILE = f"github.com:\n  {SECRET}: 1\n  oauth_token: {SECRET}\n"
ECHO = """\
block: echo
kind: transform
inputs: {text: {type: string, default: ""}}
outputs: {echoed: {type: string}}
compute: {echoed: text}
"""
GOOD_FLOW = "flow: good\nsteps:\n  - {id: a, uses: echo}\n"

YardMaker = Callable[[dict[str, str]], Path]


@pytest.fixture
def yard(make_yard: YardMaker) -> Path:
    return make_yard({"blocks/echo.yaml": ECHO, "flows/good.yaml": GOOD_FLOW})


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A credentials folder next to the yard, outside it."""
    folder = tmp_path / "home" / ".config"
    folder.mkdir(parents=True)
    (folder / "hosts.yml").write_text(SECRET_FILE, encoding="utf-8")
    (folder / "token.yaml").write_text(SECRET_FILE, encoding="utf-8")
    return folder


def every_format(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    paths: tuple[str, ...] = (),
) -> dict[str, tuple[int, str]]:
    """Exit code and everything printed (stdout and stderr), per format, run from the yard."""
    monkeypatch.chdir(root)
    capsys.readouterr()
    printed = {}
    for fmt in FORMATS:
        code = validate_command([Path(p) for p in paths], fmt, None)
        out, err = capsys.readouterr()
        printed[fmt] = (code, out + err)
    return printed


def text_lines(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    monkeypatch.chdir(root)
    validate_command([], "text", None)
    return capsys.readouterr().out.splitlines()


def outside_line(link: str) -> str:
    return f"{link}:1:1: error BY008 symbolic link {link} resolves outside the yard; it is not read"


def test_a_link_to_a_secret_file_is_reported_and_its_contents_never_printed(
    yard: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (yard / "flows" / "evil.yaml").symlink_to(secret / "token.yaml")
    (yard / "blocks" / "evil.yml").symlink_to(secret / "hosts.yml")
    for fmt, (code, printed) in every_format(yard, monkeypatch, capsys).items():
        assert code == 1, fmt
        assert (
            SECRET not in printed and "oauth_token" not in printed and "github.com" not in printed
        ), fmt
        # nor where the target is
        assert str(secret) not in printed and "hosts.yml" not in printed, fmt
        assert (
            "BY008" in printed and "flows/evil.yaml" in printed and "blocks/evil.yml" in printed
        ), fmt
    assert text_lines(yard, monkeypatch, capsys) == [
        outside_line("blocks/evil.yml"),
        outside_line("flows/evil.yaml"),
    ]


def test_the_github_annotation_lands_on_the_link(
    yard: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (yard / "flows" / "evil.yaml").symlink_to(secret / "token.yaml")
    printed = every_format(yard, monkeypatch, capsys)["github"][1]
    assert printed.splitlines()[0] == (
        "::error file=flows/evil.yaml,line=1,col=1,title=BY008::symbolic link "
        "flows/evil.yaml resolves outside the yard; it is not read"
    )


@pytest.mark.parametrize("target", ["/etc/passwd", "/proc/self/environ"])
def test_links_to_system_files_are_not_read(
    yard: Path, target: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path(target).exists():
        skip_or_fail(f"{target} does not exist on this system")
    monkeypatch.setenv("BLOCKYARD_TEST_SECRET", SECRET)
    (yard / "flows" / "system.yaml").symlink_to(target)
    for fmt, (code, printed) in every_format(yard, monkeypatch, capsys).items():
        assert code == 1, fmt
        assert SECRET not in printed and "root:" not in printed and target not in printed, fmt
    assert text_lines(yard, monkeypatch, capsys) == [outside_line("flows/system.yaml")]


def test_the_link_is_never_opened(
    yard: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO outside the yard: opening it for reading would block until a writer comes."""
    fifo = tmp_path / "outside.fifo"
    os.mkfifo(fifo)
    (yard / "flows" / "pipe.yaml").symlink_to(fifo)
    assert finishes(lambda: text_lines(yard, monkeypatch, capsys), fifo) == [
        outside_line("flows/pipe.yaml")
    ]


def test_a_linked_definition_folder_leading_out_is_not_read(
    yard: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (yard / "flows" / "good.yaml").unlink()
    (yard / "flows").rmdir()
    (yard / "flows").symlink_to(secret, target_is_directory=True)
    (yard / "blocks" / "team").symlink_to(secret, target_is_directory=True)
    for fmt, (code, printed) in every_format(yard, monkeypatch, capsys).items():
        assert code == 1 and SECRET not in printed and str(secret) not in printed, fmt
    assert text_lines(yard, monkeypatch, capsys) == [
        outside_line("blocks/team"),
        outside_line("flows"),
    ]
    project = load_project(yard)
    assert (
        not project.flows
        and "echo" in project.blocks
        and not any("github" in name for name in project.blocks)
    )


def test_a_dangling_link_and_a_loop_are_reported(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (yard / "flows" / "gone.yaml").symlink_to(yard / "nowhere.yaml")
    (yard / "flows" / "loop.yaml").symlink_to(yard / "flows" / "loop.yaml")
    (yard / "blocks" / "a.yaml").symlink_to(yard / "blocks" / "b.yaml")
    (yard / "blocks" / "b.yaml").symlink_to(yard / "blocks" / "a.yaml")
    assert text_lines(yard, monkeypatch, capsys) == [
        "blocks/a.yaml:1:1: error BY008 symbolic link blocks/a.yaml loops (it never resolves to a file); "
        "it is not read",
        "blocks/b.yaml:1:1: error BY008 symbolic link blocks/b.yaml loops (it never resolves to a file); "
        "it is not read",
        "flows/gone.yaml:1:1: error BY008 symbolic link flows/gone.yaml points at nothing (its target does not "
        "exist); it is not read",
        "flows/loop.yaml:1:1: error BY008 symbolic link flows/loop.yaml loops (it never resolves to a file); "
        "it is not read",
    ]


def test_a_fifo_does_not_hang_validate(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = yard / "flows" / "pipe.yaml"
    os.mkfifo(fifo)
    assert finishes(lambda: text_lines(yard, monkeypatch, capsys), fifo) == [
        "flows/pipe.yaml:1:1: error BY009 flows/pipe.yaml is a FIFO (named pipe), not a regular file; "
        "only regular files are read"
    ]


def test_a_link_that_stays_inside_the_yard_is_read_and_shown_by_its_own_name(
    yard: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = yard / "shared"
    shared.mkdir()
    (shared / "other.yaml").write_text(GOOD_FLOW.replace("good", "other"), encoding="utf-8")
    (shared / "broken.yaml").write_text(
        "flow: broken\nsteps:\n  - {id: a, uses: echo, wiht: 1}\n", encoding="utf-8"
    )
    (yard / "flows" / "other.yaml").symlink_to(Path("..") / "shared" / "other.yaml")
    (yard / "flows" / "broken.yaml").symlink_to(shared / "broken.yaml")
    # inside: not walked, not reported
    (yard / "flows" / "more").symlink_to(shared, target_is_directory=True)
    assert set(load_project(yard).flows) == {"good", "other"}
    assert text_lines(yard, monkeypatch, capsys) == [
        "flows/broken.yaml:3:25: error BY102 unknown key 'wiht' in 'steps[0]' (did you mean 'with'?)"
    ]
    assert (
        validate([yard / "flows" / "broken.yaml"], None).diagnostics[0].file == "flows/broken.yaml"
    )


def test_an_explicit_path_that_is_a_link_out_is_reported_not_followed(
    yard: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (yard / "flows" / "evil.yaml").symlink_to(secret / "token.yaml")
    (yard / "flows" / "gone.yaml").symlink_to(yard / "nowhere.yaml")
    printed_by_format = every_format(
        yard, monkeypatch, capsys, ("flows/evil.yaml", "flows/gone.yaml")
    )
    assert set(printed_by_format) == set(FORMATS)
    for fmt, (code, printed) in printed_by_format.items():
        assert code == 1 and SECRET not in printed and str(secret) not in printed, fmt
        assert (
            "flows/evil.yaml" in printed and "flows/gone.yaml" in printed and "BY008" in printed
        ), fmt


def test_a_config_file_linking_out_is_reported(
    yard: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (yard / "blockyard.yaml").symlink_to(secret / "hosts.yml")
    for fmt, (code, printed) in every_format(yard, monkeypatch, capsys).items():
        assert code == 1 and SECRET not in printed and "github.com" not in printed, fmt
    assert text_lines(yard, monkeypatch, capsys) == [outside_line("blockyard.yaml")]


def test_a_folder_placed_outside_by_the_config_is_still_read(tmp_path: Path) -> None:
    """`paths:` naming a folder outside the yard is the owner's explicit choice; links inside it
    that stay inside it are fine, links from there to elsewhere are not."""
    yard, shared = tmp_path / "yard", tmp_path / "shared"
    (shared / "lib").mkdir(parents=True)
    yard.mkdir()
    (yard / "blockyard.yaml").write_text("paths: {blocks: ../shared}\n", encoding="utf-8")
    (shared / "lib" / "echo.yaml").write_text(ECHO, encoding="utf-8")
    (shared / "echo2.yaml").symlink_to(shared / "lib" / "echo.yaml")
    (tmp_path / "elsewhere.yaml").write_text(ECHO.replace("echo", "stolen"), encoding="utf-8")
    (shared / "stolen.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    project = load_project(yard)
    assert "echo" in project.blocks and "stolen" not in project.blocks
    assert sorted((d.code, Path(d.file).name) for d in project.diagnostics) == [
        ("BY008", "stolen.yaml"),
        ("BY201", "echo.yaml"),
    ]


def test_a_tool_module_linking_out_of_the_code_folder_is_reported_and_never_imported(
    yard: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef f(x: str) -> str:\n    return x\n",
        encoding="utf-8",
    )
    (yard / "tools").mkdir()
    (yard / "tools" / "weather.py").symlink_to(tmp_path / "evil.py")
    (yard / "blockyard.yaml").write_text(
        "paths: {code: tools}\ntools:\n  forecast: {import: 'weather:f'}\n", encoding="utf-8"
    )
    assert text_lines(yard, monkeypatch, capsys) == [
        "blockyard.yaml:3:22: error BY008 tool 'forecast': symbolic link tools/weather.py resolves outside the "
        "yard's code folder; it is not read"
    ]
    assert not marker.exists()


def finishes(action: Callable[[], list[str]], fifo: Path, timeout: float = 10.0) -> list[str]:
    """`action()`, failing (instead of hanging the suite) if it blocks on `fifo`."""
    result: list[list[str]] = []
    worker = threading.Thread(target=lambda: result.append(action()), daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        # release the reader: open the FIFO's other end, so the stuck thread can finish
        handle = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(handle)
        worker.join(timeout)
        pytest.fail(f"blocked on the FIFO {fifo.name}")
    return result[0]
