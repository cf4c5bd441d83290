"""`python -m engine.reference [--check]`: write docs/reference/ from the code, or (--check) list the stale
pages and exit 1 when there are any."""

from __future__ import annotations

import sys

from engine.reference import COMMAND, FOLDER, stale, write


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        wrong = stale()
        for name in wrong:
            print(f"{FOLDER.name}/{name} is stale: run {COMMAND}", file=sys.stderr)
        return 1 if wrong else 0
    if argv:
        print(f"usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    written = write()
    print(
        f"wrote {len(written)} of the reference pages in docs/{FOLDER.name}/"
        + (": " + ", ".join(written) if written else " (all current)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
