"""The docs' shell blocks are marked and parsed as tests/support/docs_walk.py says (docs/testing.md, "The docs
run"); the pages themselves run in tests/docs/."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.docs_walk import GUIDES, REPO, documents, runnable, script, shell_blocks, walked


def test_every_shell_block_of_the_readme_says_whether_it_runs() -> None:
    blocks = shell_blocks(REPO / "README.md")
    assert len(blocks) >= 6, "the README's quick start and examples are shell blocks"
    unmarked = [block.where for block in blocks if block.mark is None]
    assert not unmarked, (
        f"mark each `<!-- runnable -->` or `<!-- not runnable: why -->`: {unmarked}"
    )
    first, second = blocks[0], blocks[1]
    assert first.mark == "runnable" and [c for _, c in first.commands] == [
        "bash .ci/setup && . .venv/bin/activate && blockyard run hello"
    ]
    assert second.mark == "runnable" and [c for _, c in second.commands] == ["bash .ci/test"]
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert run.rstrip().endswith("\nbash .ci/test"), (
        ".ci/run ends with exactly the README's test command"
    )


def test_every_shell_block_a_newcomer_follows_says_whether_it_runs() -> None:
    """The tutorial and the how-to guides are followed step by step, like the README: each shell block is
    run by the suite or says why not."""
    pages = [
        path
        for path in documents()
        if any(str(path.relative_to(REPO)).startswith(guide) for guide in GUIDES)
    ]
    assert REPO / "docs" / "tutorial.md" in pages and len(pages) >= 8, (
        "the tutorial and the how-to guides"
    )
    unmarked = [block.where for path in pages for block in shell_blocks(path) if block.mark is None]
    assert not unmarked, (
        f"mark each `<!-- runnable -->` or `<!-- not runnable: why -->`: {unmarked}"
    )
    tutorial = shell_blocks(REPO / "docs" / "tutorial.md")
    assert sum(block.mark == "runnable" for block in tutorial) >= 10
    assert [block for block in tutorial if block.mark not in ("runnable", "file")] == [
        block for block in tutorial if block.mark and "starts a server" in block.mark
    ], (
        "every step of the tutorial runs (a server it shows runs in the background in a runnable block)"
    )


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_the_block_parser_reads_marks_continuations_and_console_prompts(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- runnable -->\n```sh\necho a \\\n  b   # joined\n\n# a comment\nfalse  # (exit 1)\n```\n"
        "text\n\n<!-- not runnable: a server -->\n\n```console\n$ echo c\nc\n```\n"
        "```bash\necho unmarked\n```\n```yaml\nnot: shell\n```\n",
        encoding="utf-8",
    )
    blocks = shell_blocks(page)
    assert [(b.line, b.language, b.mark) for b in blocks] == [
        (2, "sh", "runnable"),
        (13, "console", "not runnable: a server"),
        (17, "bash", None),
    ]
    assert blocks[0].commands == ((3, "echo a \\\n  b   # joined"), (7, "false  # (exit 1)"))
    assert blocks[1].commands == ((14, "echo c"),)


def test_a_file_block_is_written_where_the_shell_is_before_the_commands_after_it(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- runnable -->\n```sh\nmkdir yard && cd yard\n```\nSave it:\n\n<!-- file: flows/a.yaml -->\n"
        "```yaml\nflow: a   # it's $HOME, `quoted`\n```\n<!-- runnable -->\n```sh\n"
        "grep -q 'flow: a' flows/a.yaml\ntest -f ../yard/flows/a.yaml\n```\n",
        encoding="utf-8",
    )
    blocks = shell_blocks(page)
    assert [(b.mark, b.file) for b in blocks] == [
        ("runnable", None),
        ("file", "flows/a.yaml"),
        ("runnable", None),
    ]
    assert blocks[1].text == "flow: a   # it's $HOME, `quoted`\n"
    result = subprocess.run(
        ["bash", "-c", script(runnable(blocks))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "yard" / "flows" / "a.yaml").read_text(encoding="utf-8") == blocks[1].text
    assert runnable([blocks[1]]) == [], "files alone are not a runnable page"


def test_every_runnable_page_is_walked() -> None:
    pages = [path for path in documents()[1:] if runnable(shell_blocks(path))]
    walks = [
        *walked("tutorial"),
        *walked("contributing"),
        *walked("langgraph-server"),
        *walked("others"),
    ]
    assert sorted(walks) == sorted(pages) and len(walks) == len(set(walks)), (
        "each runnable page runs, once"
    )
    assert REPO / "docs" / "testing.md" in pages, "the contributors' quick start is runnable"
    assert REPO / "docs" / "tutorial.md" in pages, "the tutorial runs, every step"
