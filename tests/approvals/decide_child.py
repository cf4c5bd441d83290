"""A child process for the decision race: say "ready", wait for the go line, then approve a gate.

usage: python decide_child.py ROOT RUN_ID NAME
  -> prints "ready" once the database is open, blocks until a line arrives on stdin (the parent
     writes it to every child at once: a barrier, not a poll), then prints {"ok": bool,
     "status"|"error": ...} as JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine import Yard
from engine.core.errors import BlockyardError


def main(root: Path, run_id: str, name: str) -> None:
    with Yard.open(root) as yard:
        # open the database before the start signal: the race is the decision itself
        yard.get_run(run_id)
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            result = yard.resume(run_id, approve=True, values={"tip": 1}, actor=name)
        except BlockyardError as exc:
            print(json.dumps({"ok": False, "error": str(exc)}))
            return
    print(json.dumps({"ok": True, "status": result.status, "outputs": result.outputs}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
