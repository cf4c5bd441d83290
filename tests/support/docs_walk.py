"""Docs that run (docs/testing.md, "The docs run"): the shell blocks of README.md and docs/, and how the
suite runs them as a newcomer pastes them.

Every shell block of README.md, docs/tutorial.md and docs/howto/ is marked, on the line before its fence,
`<!-- runnable -->` or `<!-- not runnable: why -->`; a block of docs/ (and its folders) that is marked runnable
runs too. The runnable blocks of one page run in order in one bash process (so `. .venv/bin/activate` and
`cd` carry over), in a copy of the repository of the page's own, each command checked for its exit status: 0,
or N where its comment says `(exit N)`. A block (of any language) marked `<!-- file: PATH -->` is a file the
reader saves: it is written to PATH, relative to the shell's folder at that point, before the commands after
it run. The pages run with Debian's externally managed system Python (PEP 668) as `python3`: each makes its
copy's `.venv` with `.ci/setup`, as its first command says. The README's walk is
tests/docs/test_walk_readme.py; the other pages' are spread over the files of tests/docs/ (WALKS), so that
the suite's workers walk them side by side.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
SHELLS = {"sh", "bash", "shell", "console"}
MARK = re.compile(r"<!--\s*(runnable|not runnable:[^>]*\S)\s*-->")
FILE_MARK = re.compile(r"<!--\s*file:\s*(\S+)\s*-->")
# The README's test command runs the whole suite; from inside the suite it runs a narrow selection of
# files that have tests in both of its passes (the Postgres pass alone collecting nothing would fail),
# each pass in one process (`-n 0`): six pytest-xdist workers for a few tests cost twice the CPU
# (~27 s against ~14 s on 2 cores, 2026-11-29), and the suite itself runs on workers anyway.
NARROWED = {"bash .ci/test": "bash .ci/test tests/test_flowtests.py -n 0"}
# The port a reader's server listens on (the tutorial, the how-tos): a free one in the suite, where another
# test (or the reader's own `blockyard serve`) may hold the one the page names.
FREE_PORT = (
    'export PORT=$(python3 -c \'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); '
    "print(s.getsockname()[1])')"
)
SUBSTITUTED = {**NARROWED, "export PORT=8000": FREE_PORT}
# The pages a newcomer follows step by step: every shell block of theirs says whether it runs
GUIDES = ("README.md", "docs/tutorial.md", "docs/howto/")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    mark: str | None
    commands: tuple[tuple[int, str], ...]  # (line, command), continuation lines joined
    file: str | None = None  # `<!-- file: PATH -->`: the block is that file's content
    text: str = ""

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _shown(path: Path) -> str:
    """A page as messages name it: relative to the repository (a test's own page: its file name)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def shell_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = re.match(r"^(```+)\s*([\w-]*)", lines[index])
        if not fence:
            index += 1
            continue
        start, language = index, fence.group(2).lower()
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(fence.group(1)))
        before = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        file = FILE_MARK.fullmatch(before.strip())
        if file:
            blocks.append(
                Block(
                    path,
                    start + 1,
                    language,
                    "file",
                    (),
                    file.group(1),
                    "".join(line + "\n" for line in lines[start + 1 : end]),
                )
            )
        elif language in SHELLS:
            mark = MARK.fullmatch(before.strip())
            blocks.append(
                Block(
                    path,
                    start + 1,
                    language,
                    mark.group(1) if mark else None,
                    _commands(lines, start + 1, end, console=language == "console"),
                )
            )
        index = end + 1
    return blocks


def _commands(
    lines: list[str], first: int, end: int, *, console: bool
) -> tuple[tuple[int, str], ...]:
    commands: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number in range(first, end):
        text = lines[number]
        if pending is None:
            if console:
                if not text.startswith("$ "):
                    continue  # output the console block shows
                text = text[2:]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            pending = (number + 1, text)
        else:
            pending = (pending[0], pending[1] + "\n" + text)
        if pending[1].endswith("\\"):
            continue
        commands.append(pending)
        pending = None
    assert pending is None, f"{lines[first - 1]!r}: a continuation line ends the block"
    return tuple(commands)


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def runnable(blocks: list[Block]) -> list[Block]:
    """What runs of a page: its runnable shell blocks and the files it has the reader save, in page order;
    nothing when it has no runnable command."""
    kept = [block for block in blocks if block.mark in ("runnable", "file")]
    return kept if any(block.mark == "runnable" for block in kept) else []


def script(blocks: list[Block]) -> str:
    """One bash script: each command, then a check of its status that names its line; each file written."""
    parts = ["set -u"]
    for block in blocks:
        if block.file is not None:
            assert "\nBLOCKYARD_FILE_END\n" not in "\n" + block.text, block.where
            target = _quote(block.file)
            parts += [
                f"echo {_quote('# ' + block.where + ': ' + block.file)} >&2",
                f"mkdir -p \"$(dirname {target})\" && cat > {target} <<'BLOCKYARD_FILE_END'",
                block.text + "BLOCKYARD_FILE_END",
                f'if [ $? -ne 0 ]; then echo "{block.where}: could not write {block.file}" >&2; exit 1; fi',
            ]
            continue
        for line, command in block.commands:
            expected = re.search(r"\(exit (\d+)\)\s*$", command)
            status = int(expected.group(1)) if expected else 0
            where = f"{_shown(block.path)}:{line}"
            parts += [
                f"echo {_quote('$ ' + command.splitlines()[0])} >&2",
                SUBSTITUTED.get(command.split("#")[0].strip(), command),
                f'status=$?; if [ "$status" -ne {status} ]; then '
                f'echo "{where}: exit $status, expected {status}" >&2; exit 1; fi',
            ]
    return "\n".join(parts) + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def externally_managed_python() -> Path | None:
    """Debian's system Python, which refuses `pip install` outside a venv (PEP 668)."""
    for candidate in (Path("/usr/bin/python3"), Path("/usr/local/bin/python3")):
        if not candidate.exists():
            continue
        stdlib = subprocess.run(
            [str(candidate), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
        if stdlib and (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
            return candidate
    return None


def copy_of_the_repository(target: Path) -> Path:
    """The files a clone would have (tracked, and new ones not ignored), as they are in the work tree."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=60,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def newcomer_environment(bin_dir: Path, python: Path) -> dict[str, str]:
    """A shell as a newcomer has it: no venv active, the system Python first as python3, nothing of this
    suite's own settings; the machine's own (certificates, caches, HOME) kept."""
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    ours = (os.environ.get("VIRTUAL_ENV"), str(Path(sys.executable).parent))
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
        and not name.startswith(("PYTEST_", "BLOCKYARD_", "COV_"))
    }
    path = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not any(entry == mine or entry.startswith(f"{mine}/") for mine in ours if mine)
    ]
    env["PATH"] = os.pathsep.join([str(bin_dir), *path])
    # a newcomer's git knows who they are (the tutorial commits); a machine without an identity gets one here
    for name, value in (
        ("GIT_AUTHOR_NAME", "Newcomer"),
        ("GIT_AUTHOR_EMAIL", "newcomer@example.com"),
        ("GIT_COMMITTER_NAME", "Newcomer"),
        ("GIT_COMMITTER_EMAIL", "newcomer@example.com"),
    ):
        env.setdefault(name, value)
    return env


# The pages besides the README whose runnable blocks run, by the test file of tests/docs/ that walks them.
# "others" takes every page no other walk names, so a page that gains a runnable block is walked.
WALKS = {
    "tutorial": ("docs/tutorial.md",),
    # runs the README's test command, narrowed, on both backends
    "contributing": ("docs/testing.md",),
    # LangGraph's own server, `langgraph dev`
    "langgraph-server": ("docs/howto/langgraph-server.md",),
}


def walked(name: str) -> list[Path]:
    """The pages walk `name` runs: its own, or, for "others", every runnable page besides the README that no
    walk names."""
    if name != "others":
        return [REPO / page for page in WALKS[name]]
    named = {REPO / page for pages in WALKS.values() for page in pages}
    return [path for path in documents()[1:] if path not in named and runnable(shell_blocks(path))]


def walk(page: Path, tmp_path: Path, *, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the runnable blocks of `page` as a newcomer pastes them, in a copy of the repository of its own;
    fails the test, naming the page and showing the end of its output, unless every command exits as its
    page says."""
    python = externally_managed_python()
    if python is None:
        skip_or_fail(
            "no externally managed system Python (Debian's python3) to paste the docs against"
        )
        raise AssertionError("unreachable")  # skip_or_fail raises
    blocks = runnable(shell_blocks(page))
    assert blocks, f"{_shown(page)} has no runnable block"
    repo = copy_of_the_repository(tmp_path / "clone")
    env = newcomer_environment(tmp_path / "bin", python)
    result = subprocess.run(
        ["bash", "-c", script(blocks)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"{_shown(page)}: {result.stderr[-6000:]}\n{result.stdout[-3000:]}"
    )
    return result
