"""Import boundaries: resolving models loads a provider SDK only when a profile uses it."""

from __future__ import annotations

import subprocess
import sys


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_mock_runs_load_no_sdk() -> None:
    statement = (
        "import asyncio\n"
        "from engine.models import ModelResolver, StructuredRequest, is_transient\n"
        "from engine.spec import ConfigSpec, LlmBlock, PromptSpec\n"
        "block = LlmBlock(block='b', kind='llm', prompt=PromptSpec(user='hi'))\n"
        "model = ModelResolver(ConfigSpec(), env={}).for_block(block)\n"
        "schema = {'type': 'object', 'properties': {'x': {'type': 'string'}}}\n"
        "asyncio.run(model.structured(StructuredRequest('f', 's', 'b', None, None, schema, {})))\n"
        "is_transient(TimeoutError(), ['timeout'])\n"
    )
    assert not loaded_after(statement) & {
        "openai",
        "langchain_openai",
        "langchain_core",
        "langgraph",
        "httpx",
    }


def test_openai_profiles_load_langchain_openai_on_first_use() -> None:
    statement = (
        "from engine.models import ModelResolver\n"
        "from engine.spec import ConfigSpec, LlmBlock, PromptSpec\n"
        "block = LlmBlock(block='b', kind='llm', prompt=PromptSpec(user='hi'))\n"
        "ModelResolver(ConfigSpec(), env={'OPENAI_API_KEY': 'k'}).for_block(block)\n"
    )
    assert "langchain_openai" in loaded_after(statement)
