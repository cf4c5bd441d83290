"""`python -m engine`: the `blockyard` command."""

import gc

gc.disable()  # before the CLI's imports, as main() starts a `blockyard` process (engine/cli/startup.py)

from engine.cli import main  # noqa: E402 - after the line above, which is the point

raise SystemExit(main())
