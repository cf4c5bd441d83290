"""wait blocks: sleep for the block's `duration` (a timer; external events come later)."""

from __future__ import annotations

import asyncio

from engine.core.values import JsonDict
from engine.nodes.call import BlockCall, Executor
from engine.spec import WaitBlock, parse_duration


def prepare(block: WaitBlock, where: str) -> Executor:
    seconds = parse_duration(block.duration)

    async def run(call: BlockCall) -> JsonDict:
        await asyncio.sleep(seconds)
        return {}

    return run
