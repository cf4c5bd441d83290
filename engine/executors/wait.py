"""wait blocks: sleep for the block's `duration` (a timer; external events come later)."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.nodes.call import BlockCall, Executor
from engine.nodes.errors import internal
from engine.spec import BlockSpec, parse_duration


def prepare(block: BlockSpec, where: str) -> Executor:
    if block.duration is None:
        raise internal(f"{where}: wait block '{block.block}' without `duration`", "BY352")
    seconds = parse_duration(block.duration)

    async def run(call: BlockCall) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {}

    return run
