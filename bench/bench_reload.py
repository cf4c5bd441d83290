"""Hot reload: how long from saving a flow file until `blockyard serve` serves the new version.

    python bench/bench_reload.py           # BENCH_EDITS=30 edits per yard size by default
    python bench/bench_reload.py --json    # the medians (ms) per yard size as one JSON object

BENCH_FLOWS=10,200 (the default) sets the yard sizes.

A real `blockyard serve` subprocess watches a yard; this process rewrites one flow file with a new
version number, then polls GET /flows/{name} (every 2 ms) until that version is served. The time
counted is from just before the write to the first answer showing the new version: file-system
notification, watchfiles' batching (step 15 ms), loading and checking the whole yard, compiling
the changed flow, and the swap. Measured on a small yard (the example's size) and a large one.
Target: median under 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import table
from bench_serve import ServeProcess

EDITS = int(os.environ.get("BENCH_EDITS", 30))
SIZES = [int(n) for n in os.environ.get("BENCH_FLOWS", "10,200").split(",")]

BLOCK = """
block: step{n}
version: 1
kind: transform
inputs:
  value: {{type: integer}}
outputs:
  value: {{type: integer}}
compute:
  value: "value + {n}"
"""


def flow(name: str, version: int, steps: int = 6) -> str:
    body = "\n".join(f"  - id: s{i}\n    uses: step{i}" for i in range(steps))
    return (
        f"flow: {name}\nversion: {version}\ndescription: Add the numbers one to {steps}.\n"
        f"inputs:\n  value: {{type: integer, default: 0}}\noutputs: [value]\nsteps:\n{body}\n"
    )


def make_yard(flows: int) -> Path:
    root = Path(tempfile.mkdtemp(prefix="blockyard-bench-reload-"))
    (root / "blocks").mkdir()
    (root / "flows").mkdir()
    for n in range(6):
        (root / f"blocks/step{n}.yaml").write_text(BLOCK.format(n=n).lstrip())
    for index in range(flows):
        (root / f"flows/f{index:04d}.yaml").write_text(flow(f"f{index:04d}", 1))
    return root


def measure(flows: int) -> list[float]:
    root = make_yard(flows)
    server = ServeProcess(root)
    samples: list[float] = []
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.get("/flows/f0000").json()["version"] == 1
            for version in range(2, EDITS + 2):
                time.sleep(0.1)  # edits a person makes are apart; don't measure a queue of reloads
                began = time.perf_counter()
                (root / "flows/f0000.yaml").write_text(flow("f0000", version))
                while client.get("/flows/f0000").json()["version"] != version:
                    time.sleep(0.002)
                samples.append(time.perf_counter() - began)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json", action="store_true", help="median ms per yard size as one JSON object"
    )
    if parser.parse_args().json:
        print(
            json.dumps(
                {
                    "edits": EDITS,
                    "median_ms": {
                        str(flows): statistics.median(measure(flows)) * 1000 for flows in SIZES
                    },
                }
            )
        )
        return
    print(f"\n## hot reload: save -> new version served, {EDITS} edits per yard\n")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; one `blockyard serve` process per yard size\n"
    )
    rows = []
    for flows in SIZES:
        samples = measure(flows)
        ms = sorted(s * 1000 for s in samples)
        rows.append(
            [
                str(flows),
                f"{statistics.median(ms):.0f} ms",
                f"{ms[int(0.9 * (len(ms) - 1))]:.0f} ms",
                f"{ms[0]:.0f} ms",
                f"{ms[-1]:.0f} ms",
            ]
        )
    print(table(["flows in the yard", "median", "p90", "min", "max"], rows))


if __name__ == "__main__":
    main()
