"""Import boundaries: the validator's view of tools loads no tool code and no SDK."""

from __future__ import annotations

import subprocess
import sys

from engine.tools.names import BUILTIN_TOOLS

HEAVY = (
    "langgraph",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "openai",
    "httpx",
    "engine.tools.registry",
)


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_names_load_nothing_else() -> None:
    assert not loaded_after("import engine.tools.names") & set(HEAVY)


def test_the_registry_loads_no_http_client_until_a_request() -> None:
    loaded = loaded_after("from engine.tools import build_registry")
    assert "engine.tools.registry" in loaded
    assert not loaded & {"httpx", "openai", "langchain_core", "langgraph"}


def test_builtin_names_match_the_registered_tools() -> None:
    from engine.spec import ConfigSpec
    from engine.tools.builtin import builtin_tools

    assert {tool.name for tool in builtin_tools(ConfigSpec(), None)} == BUILTIN_TOOLS
