"""A child process for the kill -9 test: COUNT turns of FLOW in THREAD, one after the other.

usage: python turns_child.py ROOT FLOW THREAD FIRST COUNT   -> prints one line per finished turn
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine import Yard


def main(root: Path, flow: str, thread: str, first: int, count: int) -> None:
    with Yard.load(root) as yard:
        for turn in range(first, first + count):
            result = yard.run(flow, {"message": f"turn {turn}"}, thread=thread)
            print(result.status, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
