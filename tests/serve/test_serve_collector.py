"""`blockyard serve` and the cyclic garbage collector (engine/cli/startup.py, `serving`): what the server
loaded before it listens (uvicorn, FastAPI, the runtime, the yard, the app) is frozen, and its young
collections are rarer, so that runs in flight do not set off full collections of the whole heap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.cli.startup import SERVER_THRESHOLDS
from tests.support.example import REPO, copy_example_yard

KEYS = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
)

# `blockyard serve` in a process of its own, as the `blockyard` script starts it (engine.console), up to the
# moment uvicorn would serve: then the collector's state is printed instead, and the command returns.
PROBE = (
    "import gc, json, sys\n"
    "from engine.console import main\n"
    "import uvicorn\n"
    "seen = {}\n"
    "def run(self, *args, **kwargs):\n"
    "    seen.update(enabled=gc.isenabled(), threshold=list(gc.get_threshold()), tracked=len(gc.get_objects()),\n"
    "                app_frozen=not gc.is_tracked(self.config.app) or self.config.app not in gc.get_objects())\n"
    "uvicorn.Server.run = run\n"
    "sys.argv = ['blockyard', 'serve', '--root', sys.argv[1], '--port', '1']\n"
    "code = main()\n"
    "print(json.dumps({'code': code, **seen}))\n"
)


def test_a_served_yard_is_frozen_and_young_collections_are_rarer(tmp_path: Path) -> None:
    root = copy_example_yard(tmp_path / "yard")
    env = {key: value for key, value in os.environ.items() if key not in KEYS}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["code"] == 0 and seen["enabled"] is True
    assert tuple(seen["threshold"]) == SERVER_THRESHOLDS
    # the app and everything the start loaded (100,000+ objects) is out of the collector's reach; what it
    # still tracks is what the probe itself made after, a few thousand objects
    assert seen["app_frozen"] is True
    assert seen["tracked"] < 20_000, seen
