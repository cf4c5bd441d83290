"""Shared helpers of the benchmarks: interleaved rounds, medians, tables, throw-away yards.

Variants are measured round-robin (order reversed every other round) after a warm-up, so slow
drift of this shared machine hits all of them alike; each table reports medians.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

Variant = Callable[[], Awaitable[float]]  # one sample: returns seconds


def child_env(cache: Path | None = None) -> dict[str, str]:
    """The environment of a benchmark's child processes: bytecode cached (in `cache`, or one folder per
    machine) as an installed package has it. This machine sets PYTHONDONTWRITEBYTECODE, under which
    every child would compile the engine's modules from source and time that too."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(
        cache or Path(tempfile.gettempdir()) / "blockyard-bench-pycache"
    )
    return env


def rounds(default: int) -> int:
    """Rounds per variant: BENCH_ROUNDS in the environment, or the script's default."""
    return int(os.environ.get("BENCH_ROUNDS", default))


async def measure(
    variants: dict[str, Variant], count: int, warmup: int = 1, *, collect: bool = False
) -> dict[str, list[float]]:
    """Samples per variant, interleaved; `collect`: a full garbage collection before each sample, so
    that no sample pays for the garbage another left (without it, the collector runs wherever the
    allocations happen to cross its threshold)."""
    names = list(variants)
    for name in names:
        for _ in range(warmup):
            await variants[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(count):
        order = names if index % 2 == 0 else list(reversed(names))
        for name in order:
            if collect:
                gc.collect()
            samples[name].append(await variants[name]())
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    began = time.perf_counter()
    await fn()
    return time.perf_counter() - began


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    return "\n".join([line, rule, *body])


def make_yard(files: dict[str, str]) -> Path:
    """A yard in a fresh temporary folder (kept until the process exits)."""
    root = Path(tempfile.mkdtemp(prefix="blockyard-bench-"))
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (root / "blocks").mkdir(exist_ok=True)
    (root / "flows").mkdir(exist_ok=True)
    return root


def fresh_db(folder: Path, name: str) -> Path:
    """A path for a new database file (old files of that name removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(name + "*"):
        old.unlink()
    return folder / name


def header(title: str) -> None:
    print(f"\n## {title}\n")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; medians of interleaved rounds\n"
    )


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())
