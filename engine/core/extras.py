"""What to install for an optional extra: every message that names an install asks here.

The extras are `blockyard-core`'s (pyproject.toml): `run` (the runtime), `dspy`, `mcp`, `anthropic`,
`google`, `postgres`. A message names the extra's own requirements, read from the installed
distribution's metadata (`pip install 'dspy>=2.6'`), so the command works wherever the engine came
from — a wheel, a checkout, `pip install git+URL` — and whether or not Blockyard is on an index.
Every extra but `run` also requires the runtime (`blockyard-core[run]`, which the build writes out as
the runtime's own requirements): that part is left out, the runtime having its own message. Without
the metadata (the engine imported from a checkout that was never installed) the message names the
extra of the checkout: `pip install -e '.[dspy]'`.

Only the standard library: validation loads this module (the schema's texts, the CLI), and the core
installs no `packaging`.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex

DISTRIBUTION = "blockyard-core"
RUNTIME = "run"  # the extra every other one builds on

_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*(['"])([^'"]+)\1""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _own(extra: str, lines: list[str]) -> list[str]:
    """The requirements `lines` (Requires-Dist) put in force for `extra` only, markers dropped."""
    found = []
    for line in lines:
        requirement, _, marker = line.partition(";")
        if extra in {_canonical(match.group(2)) for match in _EXTRA_MARKER.finditer(marker)}:
            found.append(requirement.strip())
    return found


def requirements(extra: str) -> list[str] | None:
    """The extra's own requirements as the installed distribution declares them, sorted (`['dspy>=2.6']`),
    without the runtime's for an extra that builds on it and without a reference to the distribution
    itself; None when the distribution's metadata is not installed (or names no such extra)."""
    extra = _canonical(extra)
    try:
        lines = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    own = _own(extra, lines)
    if not own:
        return None
    runtime = set(_own(RUNTIME, lines)) if extra != RUNTIME else set()
    kept = {line for line in own if line not in runtime and not _is_self(line)}
    return sorted(kept, key=lambda line: (_canonical(_name(line)), line))


def _name(requirement: str) -> str:
    match = _NAME.match(requirement)
    return match.group(1) if match else requirement


def _is_self(requirement: str) -> bool:
    return _canonical(_name(requirement)) == DISTRIBUTION


def install(extra: str, *, upgrade: bool = False) -> str:
    """The command that installs the extra: `pip install 'dspy>=2.6'` (from a checkout never installed:
    `pip install -e '.[dspy]'`); `upgrade` for an installed release too old (`pip install -U ...`)."""
    needed = requirements(extra)
    command = "pip install -U" if upgrade else "pip install"
    if not needed:
        return f"{command} -e '.[{_canonical(extra)}]'"
    return f"{command} " + " ".join(shlex.quote(line) for line in needed)


def missing(extra: str) -> str:
    """`the dspy extra is not installed: pip install 'dspy>=2.6'` (to end a message with)."""
    return f"the {_canonical(extra)} extra is not installed: {install(extra)}"
