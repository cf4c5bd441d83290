"""The `blockyard` command's entry point: `[project.scripts]` in pyproject.toml, and `python -m engine`.

The script pip writes for the command imports this module and then calls `main()`. Pointed at
`engine.cli` itself, it imported the CLI — pydantic, the spec models, click: some 100,000 objects —
with the cyclic garbage collector on, which `main()` turns off only after them (engine/cli/startup.py):
some fifty collections that free nothing, ~10 ms of a cold `blockyard validate`. Here the collector is
off before those imports, as for the rest of a `blockyard` process's start. Only the command's own
process imports this module; a program or a test calling `engine.cli.main` keeps its collector.
"""

from __future__ import annotations

import gc

gc.disable()  # before the CLI's imports: the point of this module

from engine.cli import main  # noqa: E402 - after the line above

__all__ = ["main"]
