"""Where a yard's state database is: the SQLite file `paths.state` (the default), or a Postgres
server named by a URL — `database:` in blockyard.yaml, or BLOCKYARD_DATABASE_URL, which wins.

A `Location` is what every part that opens the state database is given (the engine, the CLI's
readers, the server's schedules); the backend behind it is chosen in `engine/state/backends.py`.
It never shows the URL's password: `str(location)` and every error built from it mask it
(engine/core/redaction.py, `mask_url`). See docs/postgres.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.errors import UsageError
from engine.core.redaction import mask_url

URL_ENV = "BLOCKYARD_DATABASE_URL"
SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class Location:
    """The state database: `url` (Postgres) when set, else the SQLite file `path`.

    `path` is kept with a URL too: the yard's local folders (run workspaces) sit beside it."""

    path: Path
    url: str | None = field(default=None, repr=False)

    @property
    def postgres(self) -> bool:
        return self.url is not None

    @property
    def backend(self) -> str:
        return "postgres" if self.url is not None else "sqlite"

    @property
    def shown(self) -> str:
        """How people see it: the file, or the URL with its password masked."""
        return mask_url(self.url) if self.url is not None else str(self.path)

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"Location({self.shown!r})"


def check_url(url: str, source: str) -> str:
    """A Postgres URL, or a UsageError naming where it came from (the password masked)."""
    url = url.strip()
    if not url.startswith(SCHEMES):
        raise UsageError(
            f"{source}: '{mask_url(url)}' is not a Postgres URL (postgresql://user:password@host/name)"
        )
    return url


def locate(path: Path, url: str | None = None, env: Mapping[str, str] | None = None) -> Location:
    """The state database of a yard whose SQLite file is `path` and whose blockyard.yaml says `url`
    (`database:`); BLOCKYARD_DATABASE_URL, when set, wins over both."""
    source = os.environ if env is None else env
    from_env = source.get(URL_ENV, "").strip()
    if from_env:
        return Location(path, check_url(from_env, URL_ENV))
    if url:
        return Location(path, check_url(url, "blockyard.yaml: database"))
    return Location(path)


def of_yard(root: Path, state: str, database: str | None) -> Location:
    """A yard's location from its config (`paths.state`, `database`)."""
    return locate(root / state, database)
