"""Runs hostile CLI cases in one process, the way a user's shell would, and reports each outcome.

Usage: python hostile_child.py CASES.json START. Each case is {"argv": [...], "cwd": DIR}; the
child runs `engine.cli.main(argv)` in `cwd` for cases START.. in order and writes one JSON line
per case to its original stdout: {"start": i} before, {"done": i, "rc", "secs", "cpu", "rss_kb",
"out", "err"} after. The parent (hostile_harness.py) owns the watchdog: a case without "done" in time is a
hang, and the parent kills this process and starts a new one after that case.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from engine.cli import main

KEEP = 4000  # characters of a case's output kept for the report


def _tail(text: str) -> str:
    return text if len(text) <= KEEP else text[: KEEP // 2] + "\n...\n" + text[-KEEP // 2 :]


# Imported before the first case, so that no case is charged for loading the engine's heavy parts
# (the server's only when a case serves: the files corpus never does, and they cost ~0.5 s to import).
WARM = ("engine.runtime.yard", "engine.cli.run")
WARM_SERVE = ("engine.serve.app", "engine.cli.serve")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(cases: list[dict[str, Any]], start: int) -> None:
    serves = any(case["argv"][:1] == ["serve"] for case in cases[start:])
    for module in (*WARM, *(WARM_SERVE if serves else ())):
        importlib.import_module(module)
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # anything written below Python's sys.stdout must not corrupt the channel
    os.dup2(devnull, 2)
    for index in range(start, len(cases)):
        case = cases[index]
        channel.write(json.dumps({"start": index}) + "\n")
        out, err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = out, err
        os.chdir(str(case["cwd"]))
        began, cpu = time.perf_counter(), _cpu()
        try:
            rc: int | str = main([str(arg) for arg in case["argv"]])
        except (
            BaseException
        ) as exc:  # a SystemExit or worse escaping the boundary is itself a finding
            rc = f"escaped {type(exc).__name__}: {exc}"
        secs, cpu = time.perf_counter() - began, _cpu() - cpu
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        channel.write(
            json.dumps(
                {
                    "done": index,
                    "rc": rc,
                    "secs": round(secs, 3),
                    "cpu": round(cpu, 3),
                    "rss_kb": rss,
                    "out": _tail(out.getvalue()),
                    "err": _tail(err.getvalue()),
                },
                ensure_ascii=True,
            )
            + "\n"
        )
    channel.close()


if __name__ == "__main__":
    run(
        json.loads(Path(sys.argv[1]).read_text(encoding="utf-8", errors="surrogatepass")),
        int(sys.argv[2]),
    )
