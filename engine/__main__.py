"""`python -m engine`: the `blockyard` command."""

from engine.console import main  # the collector off before the CLI's imports (engine/console.py)

raise SystemExit(main())
