"""The metapackage's version and pins, from the engine's one version (engine/core/version.py).

A hatchling metadata hook (`[tool.hatch.metadata.hooks.custom]` in pyproject.toml): it sets the version
and requires `blockyard-core[run]` and each extra (`blockyard-core[<extra>]`, the extras listed in the
hook's configuration) at exactly that version. Built from the repository, the version is read from
../../engine/core/version.py; the sdist carries that file as `engine_version.py` (the sdist target's
force-include), so a wheel built from the sdist alone reads the same version.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

SOURCES = (
    "engine_version.py",
    "../../engine/core/version.py",
)  # the sdist's copy, else the repository's


def engine_version(root: Path) -> str:
    """`__version__` of the first of SOURCES under `root` (an sdist has only its copy), read, never imported."""
    for relative in SOURCES:
        path = root / relative
        if path.is_file():
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "__version__"
                    and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                ):
                    return node.value.value
            raise ValueError(f"{path} sets no __version__ = '...'")
    raise FileNotFoundError(f"no engine version under {root}: looked for {', '.join(SOURCES)}")


class CustomMetadataHook(MetadataHookInterface):
    def update(self, metadata: dict[str, Any]) -> None:
        version = engine_version(Path(self.root))
        metadata["version"] = version
        metadata["dependencies"] = [f"blockyard-core[run]=={version}"]
        metadata["optional-dependencies"] = {
            extra: [f"blockyard-core[{extra}]=={version}"]
            for extra in self.config.get("extras", [])
        }
