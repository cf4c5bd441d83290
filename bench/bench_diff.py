"""Benchmark of `blockyard diff` (not a test): `python bench/bench_diff.py [--rounds N]`.

The example yard of this repository is committed to a throw-away git repository, then changed in a
second commit (a flow's description and a block's transform), and `blockyard diff HEAD~1 HEAD` is
timed two ways:
1. in-process (`engine.review.command.diff_yard`, with the Mermaid graphs drawn), after one warm-up
   call: reading both revisions with git, loading, validating, comparing;
2. the whole command in a fresh process (`python -m engine diff HEAD~1 HEAD --format markdown`),
   interpreter start-up and imports included.
Target (docs/review.md): under 1 s between two revisions of the example yard. Medians with the range.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.review.command import diff_yard  # noqa: E402  (after the path: the checkout, not an install)


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def example_repo() -> Path:
    root = Path(tempfile.mkdtemp(prefix="bench-diff-"))
    for folder in ("blocks", "flows", "prompts", "schemas"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    hello = root / "flows/hello.yaml"
    hello.write_text(
        hello.read_text(encoding="utf-8").replace("Greet someone", "Greet somebody"),
        encoding="utf-8",
    )
    shout = root / "blocks/shout.yaml"
    shout.write_text(shout.read_text(encoding="utf-8").replace("upper", "lower"), encoding="utf-8")
    git(root, "commit", "-q", "-am", "change")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    root = example_repo()
    found = diff_yard(root, "HEAD~1", "HEAD", draw=True).diff  # warm-up: imports, template parses
    assert [b.name for b in found.blocks] == ["shout"] and found.flow("hello") is not None
    inproc: list[float] = []
    cold: list[float] = []
    for _ in range(args.rounds):  # interleaved, so drift of a shared machine hits both alike
        began = time.perf_counter()
        diff_yard(root, "HEAD~1", "HEAD", draw=True)
        inproc.append(time.perf_counter() - began)
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "engine", "diff", "HEAD~1", "HEAD", "--format", "markdown"],
            cwd=root,
            capture_output=True,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )
        cold.append(time.perf_counter() - began)
        assert done.returncode == 1, done.stderr  # 1: differences, as `kubectl diff`
    for name, samples in (("in-process", inproc), ("whole command, fresh process", cold)):
        print(
            f"{name:30} median {statistics.median(samples) * 1000:7.1f} ms "
            f"(range {min(samples) * 1000:.1f}-{max(samples) * 1000:.1f}, {len(samples)} rounds)"
        )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
