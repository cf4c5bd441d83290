"""Blocks a converted graph or plan needs: reuse a block of the yard with the same contract, else
name a new one (written next to the flow by engine/interchange/files.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from engine.core.values import JsonDict
from engine.definitions.project import Project
from engine.spec import BlockSpec, parse_block

# what a block is called and how it is filed: two blocks that differ only here do the same thing
_NOT_CONTRACT = frozenset({"block", "version", "description", "category", "tags"})
_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def slug(text: str, fallback: str = "node") -> str:
    """A name (NAME_PATTERN of engine/spec/common.py) made of `text`: `Web search!` -> `web_search`."""
    name = _NAME.sub("_", text.strip()).strip("_-").lower()
    if not name:
        name = fallback
    if not (name[0].isalpha() or name[0] == "_"):
        name = f"{fallback}_{name}"
    return name


def contract(data: JsonDict) -> JsonDict | None:
    """What a block does, without its name and filing; None when the data is no valid block."""
    try:
        spec = parse_block(data)
    except ValidationError:
        return None
    return spec.model_dump(exclude=set(_NOT_CONTRACT), exclude_defaults=True, by_alias=True)


@dataclass
class BlockPlacer:
    """Gives every block a converted definition needs its reference: an existing block of the yard
    with the same contract, or a new block, named from a hint and kept unique."""

    project: Project
    new: dict[str, JsonDict] = field(default_factory=dict)  # name -> block data to write
    reused: dict[str, str] = field(default_factory=dict)  # hint -> existing block reused

    def place(self, hint: str, data: JsonDict) -> str:
        wanted = contract({**data, "block": hint})
        for name, versions in sorted(self.project.blocks.items()):
            newest = versions[max(versions)]
            if wanted is not None and contract(newest.doc.data) == wanted:
                self.reused[hint] = name
                return name
        for name, block in self.new.items():
            if wanted is not None and contract(block) == wanted:
                return name
        name, number = hint, 1
        while name in self.project.blocks or name in self.new:
            number += 1
            name = f"{hint}_{number}"
        self.new[name] = {
            "block": name,
            "version": 1,
            **{k: v for k, v in data.items() if k != "block"},
        }
        return name

    def exists(self, ref: str) -> BlockSpec | None:
        found = self.project.block(ref)
        if found is not None:
            return found.spec
        data = self.new.get(ref)
        return parse_block(data) if data is not None else None
