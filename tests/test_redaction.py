"""Masking API keys (engine/core/redaction.py): the rule for short keys, nested values and messages,
keys split over streamed pieces, checkpoint bytes, and the server's log lines."""

from __future__ import annotations

import asyncio
import logging
import operator
from pathlib import Path
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

from engine.core.redaction import (
    KNOWN,
    MASK,
    MIN_KEY_LENGTH,
    Masker,
    TokenMasker,
    key_values,
    key_variables,
)
from engine.serve.logs import KeyValueFormatter
from engine.state.checkpointer import StateDB

KEY = "sk-test-0123456789abcdef"


def test_keys_are_masked_in_text_and_nested_values_but_short_ones_are_not() -> None:
    masker = Masker([KEY, "local", "  ", ""])

    assert MIN_KEY_LENGTH == 8 and len("local") < MIN_KEY_LENGTH
    assert masker.text(f"a {KEY} b {KEY}") == f"a {MASK} b {MASK}"
    assert masker.text("local words stay") == "local words stay"
    value = {"out": [f"x{KEY}", (KEY, 3)], KEY: None, "n": 1.5}
    assert masker.value(value) == {"out": [f"x{MASK}", (MASK, 3)], MASK: None, "n": 1.5}
    assert KEY not in repr(masker)


def test_messages_are_copied_masked() -> None:
    message = AIMessage(
        content=f"key {KEY}", tool_calls=[{"name": "t", "args": {"q": KEY}, "id": "c1"}]
    )

    masked = Masker([KEY]).value(message)

    assert masked.content == f"key {MASK}" and masked.tool_calls[0]["args"] == {"q": MASK}
    assert message.content == f"key {KEY}"  # the original is left alone
    same = AIMessage(content="nothing secret")
    assert Masker([KEY]).value(same) is same


def test_a_key_split_over_streamed_pieces_is_masked_whole() -> None:
    sent: list[str] = []
    tokens = TokenMasker(Masker([KEY]), sent.append)
    text = f"one {KEY} two sk-test- three"  # the second one only looks like the start of a key
    for start in range(0, len(text), 5):
        tokens(text[start : start + 5])
    tokens.flush()

    assert "".join(sent) == f"one {MASK} two sk-test- three"
    assert all(KEY not in piece for piece in sent)


def test_key_variables_and_values() -> None:
    class Profile:
        api_key_env = "MY_KEY"

    names = key_variables([Profile()])
    assert names == [
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "MY_KEY",
    ]
    assert key_values(names, {"MY_KEY": f" {KEY} ", "OPENAI_API_KEY": ""}) == [KEY]


class _State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def test_checkpoints_keep_no_key_and_stay_readable(tmp_path: Path) -> None:
    graph = StateGraph(_State)
    graph.add_node("echo", lambda state: {"log": [f"said {KEY}"]})
    graph.add_edge(START, "echo")
    db = StateDB(tmp_path / "state.db", secrets=Masker([KEY]))
    app = graph.compile(checkpointer=db.saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}

    async def run() -> list[str]:
        await app.ainvoke({"log": []}, config, durability="sync")
        return list((await app.aget_state(config)).values["log"])

    try:
        log = asyncio.run(run())
    finally:
        db.close()

    assert log == ["said " + "*" * len(KEY)]  # read back from the checkpoint: masked, same length
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("state.db*"))
    assert b"said " in stored and KEY.encode() not in stored


def test_server_log_lines_mask_known_keys() -> None:
    KNOWN.add([KEY])
    record = logging.LogRecord(
        "blockyard.serve", logging.WARNING, __file__, 1, "run_rejected", None, None
    )
    record.kv = {"error": f"RunError: model said {KEY}"}

    line = KeyValueFormatter().format(record)

    assert KEY not in line and MASK in line
