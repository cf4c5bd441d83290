"""A child process for the two-processes test: COUNT concurrent runs of FLOW through the Python API.

usage: python yard_child.py ROOT FLOW COUNT   -> prints the statuses as JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from engine import Yard


async def main(root: Path, flow: str, count: int) -> None:
    with Yard.load(root) as yard:
        results = await asyncio.gather(*(yard.arun(flow, {"n": i}) for i in range(count)))
    print(json.dumps([[r.status, r.outputs] for r in results]))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
