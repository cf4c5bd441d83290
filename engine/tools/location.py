"""Whether a tool's module in the yard's code folder may be imported, decided without importing it.

Importing runs the module, so the check must come first: a module file of the code folder that is
a symbolic link resolving outside that folder (a pull request can store one) would run code from
elsewhere on the disk, so it is refused, and so is a package holding such a link. A code folder
that blockyard.yaml writes as lying outside the yard (`paths: {code: ../common}`) is the owner's
explicit choice; one inside the yard that is itself a link leading out is refused like any link.
The validator runs this too (engine/validate/semantic/config.py): it imports nothing heavy.
"""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

from engine.definitions.files import Bounds, Refused, list_files

_SOURCE_SUFFIXES = tuple(importlib.machinery.all_suffixes())


def module_problem(module: str, root: Path, code: str) -> str | None:
    """Why module `module` of the code folder `code` (relative to `root`) must not be imported, or None.

    None too when the module is not in the code folder at all (an installed package, or missing:
    the loader reports those when it imports).
    """
    folder = root / code
    try:
        real = Bounds.of(root, code).resolve(folder, f"{Path(code).as_posix()} (the code folder)")
    except Refused as refusal:
        return refusal.message
    except OSError:  # no code folder: nothing of the yard to import
        return None
    inside = Bounds((real,), "the yard's code folder")
    locations = [str(folder)]
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth]), locations)
        if spec is None:
            return None
        # a package's folder first: when it is the link, name it rather than the __init__.py behind it
        places = [Path(entry) for entry in spec.submodule_search_locations or []]
        places += [Path(spec.origin)] if spec.origin and spec.has_location else []
        for place in places:
            problem = _outside(place, inside, folder, code)
            if problem is not None:
                return problem
        if spec.submodule_search_locations is None:
            return None
        locations = list(spec.submodule_search_locations)
    for (
        package
    ) in locations:  # the module is a package: the files it may import must stay inside too
        refused = list_files(
            Path(package), inside, _is_source, lambda path: _shown(path, folder, code)
        ).refused
        if refused:
            return refused[0][1].message
    return None


def _outside(place: Path, inside: Bounds, folder: Path, code: str) -> str | None:
    try:
        inside.resolve(place, _shown(place, folder, code))
    except Refused as refusal:
        return refusal.message
    except OSError:
        return None
    return None


def _shown(path: Path, folder: Path, code: str) -> str:
    try:
        tail = path.relative_to(folder).as_posix()
    except ValueError:
        return path.as_posix()
    return tail if code in ("", ".") else f"{Path(code).as_posix()}/{tail}"


def _is_source(name: str) -> bool:
    return name.endswith(_SOURCE_SUFFIXES)
