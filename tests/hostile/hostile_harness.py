"""Drives hostile CLI cases through hostile_child.py with a watchdog, and judges the outcomes.

A case passes when the command spends at most CPU_SECONDS of processor time (what a template
bomb or a quadratic check burns; wall time on a shared 2-core machine says more about the other
processes), ends at all (a watchdog kills a child whose case gives no answer within HANG_SECONDS
while it burns no processor time — a hang, e.g. on a lock or a pipe; a case still computing on a
machine too busy to give it the processor gets up to CASE_SECONDS), exits with a code a user may
see (0 ok, 1 failure, 2 usage, 3 paused; never 4, the internal-error code), prints no traceback
and no "internal error", and the process stays under MAX_RSS_MB. A hang kills the child; the next
cases go on in a fresh one, so one finding never hides the rest.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hostile.hostile_corpus import file_cases
from tests.support import processes

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("hostile_child.py")
CPU_SECONDS = 5.0
HANG_SECONDS = 30.0
CASE_SECONDS = (
    180.0  # the longest a case that keeps using the processor may take, on a loaded machine
)
WORKING_CPU = 0.2  # processor seconds a child must have used in HANG_SECONDS not to count as hung
STARTUP_SECONDS = 60.0  # the first case also pays the imports, on a busy 2-core machine
MAX_RSS_MB = 1536
ALLOWED_EXIT = {0, 1, 2, 3}
# yards in the hostile files corpus
FILE_CASES = int(os.environ.get("BLOCKYARD_HOSTILE_FILES", "160"))
FILE_SEED = 9
FILE_PARTS = (
    2  # test_hostile_files_1.py and _2.py: one file each, so that xdist runs them on two workers
)


@dataclass
class Outcome:
    case: dict[str, Any]
    rc: Any = None
    secs: float = 0.0
    cpu: float = 0.0
    rss_kb: int = 0
    out: str = ""
    err: str = ""
    hung: bool = False

    def problems(self) -> list[str]:
        found: list[str] = []
        if self.hung:
            found.append(f"no answer within {HANG_SECONDS:.0f} s")
            return found
        if self.rc not in ALLOWED_EXIT:
            found.append(f"exit {self.rc}")
        for text in (self.out, self.err):
            if "Traceback (most recent call last)" in text:
                found.append("printed a traceback")
            if "internal error" in text:
                found.append("internal error")
        if self.cpu > CPU_SECONDS:
            found.append(f"took {self.cpu:.1f} s of CPU time")
        if self.rss_kb > MAX_RSS_MB * 1024:
            found.append(f"peak memory {self.rss_kb // 1024} MB")
        return found

    def describe(self) -> str:
        argv = " ".join(repr(a) if " " in str(a) else str(a) for a in self.case["argv"])
        argv = argv if len(argv) <= 160 else argv[:150] + "..." + argv[-10:]
        label = self.case.get("label", "")
        tail = (self.err or self.out).strip().splitlines()[-3:]
        return (
            f"[{label}] blockyard {argv}: {', '.join(self.problems())} :: {' | '.join(tail)[:400]}"
        )


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.problems()]

    def summary(self, limit: int = 40) -> str:
        bad = self.failures()
        lines = [f"{len(bad)} of {len(self.outcomes)} hostile cases failed:"]
        lines += [o.describe() for o in bad[:limit]]
        if len(bad) > limit:
            lines.append(f"... and {len(bad) - limit} more")
        return "\n".join(lines)


def child_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("BLOCKYARD_")
    }
    env.update({"PYTHONPATH": str(REPO), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    return env


def run_cases(cases: list[dict[str, Any]], workdir: Path) -> Report:
    """Run every case, restarting the child after a hang; one Outcome per case, in order."""
    spec = workdir / "cases.json"
    spec.write_text(json.dumps(cases, ensure_ascii=True), encoding="ascii")
    report = Report()
    start = 0
    while start < len(cases):
        start = _run_child(cases, spec, start, report)
    return report


def _run_child(cases: list[dict[str, Any]], spec: Path, start: int, report: Report) -> int:
    child = processes.Popen(
        [sys.executable, str(CHILD), str(spec), str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
        cwd=str(spec.parent),
    )
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    buffer = b""
    current: int | None = None
    began = time.monotonic()
    deadline = began + STARTUP_SECONDS
    cpu = _cpu_seconds(child.pid)
    try:
        while True:
            if b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(timeout=remaining):
                    used, cpu = _cpu_seconds(child.pid) - cpu, _cpu_seconds(child.pid)
                    if used >= WORKING_CPU and time.monotonic() - began < CASE_SECONDS:
                        deadline = time.monotonic() + HANG_SECONDS  # computing, slowly: not a hang
                        continue
                    index = start if current is None else current
                    report.outcomes.append(Outcome(cases[index], hung=True))
                    return index + 1
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:  # the child died (a crash the boundary did not catch)
                    index = start if current is None else current
                    report.outcomes.append(Outcome(cases[index], rc=f"child died ({child.wait()})"))
                    return index + 1
                buffer += chunk
                continue
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if "start" in message:
                current = message["start"]
                # the first case of a child also pays for importing the engine
                began = time.monotonic()
                deadline = began + (STARTUP_SECONDS if current == start else HANG_SECONDS)
                cpu = _cpu_seconds(child.pid)
            else:
                report.outcomes.append(
                    Outcome(
                        cases[message["done"]],
                        rc=message["rc"],
                        secs=message["secs"],
                        cpu=message["cpu"],
                        rss_kb=message["rss_kb"],
                        out=message["out"],
                        err=message["err"],
                    )
                )
                if message["done"] == len(cases) - 1:
                    return len(cases)
    finally:
        selector.close()
        if child.poll() is None:
            child.kill()
        child.wait()


def _cpu_seconds(pid: int) -> float:
    """The processor time process `pid` has used (user and system, Linux's /proc), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime: fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_file_part(workdir: Path, index: int) -> None:
    """Run part `index` of FILE_PARTS of the hostile files corpus (validate, run a flow, sometimes one
    more command, per yard) and assert that every case got a clear answer."""
    size = -(-FILE_CASES // FILE_PARTS)
    part = range(index * size, min(FILE_CASES, (index + 1) * size))
    report = run_cases(file_cases(workdir, FILE_CASES, seed=FILE_SEED, part=part), workdir)
    assert len(report.outcomes) >= 2 * len(part)
    assert not report.failures(), report.summary()
    # the yards' unchanged files are hard links to this copy of the example: no case may have written to them
    pristine = workdir / "example"
    changed = [
        str(path.relative_to(pristine))
        for path in sorted(pristine.rglob("*"))
        if path.is_file() and path.read_bytes() != (REPO / path.relative_to(pristine)).read_bytes()
    ]
    assert not changed, f"a case wrote to a file it shares with the other yards: {changed}"
