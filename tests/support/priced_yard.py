"""A yard whose mock model states its prices, for the tests of usage and cost (docs/observability.md):
the CLI's (tests/runtime/test_usage_cli.py) and the server's (tests/serve/test_serve_usage.py)."""

from __future__ import annotations

import json

# the mock at a stated price: $1000 per million input tokens, $2000 per million output tokens
PRICED = {"input_per_mtok": 1000, "output_per_mtok": 2000}
PRICED_MOCK = f"{{provider: mock, pricing: {json.dumps(PRICED)}}}"  # a model profile, inline in blockyard.yaml

GREET = """
block: greet
kind: llm
inputs: {name: {type: string}}
outputs: {greeting: {type: string}}
prompt: {user: "Greet {{ name }}."}
"""
EXPLODE = """
block: explode
kind: tool
tool: explode
inputs: {text: {type: string}}
outputs: {echo: {type: string}}
"""
FRAGILE = """
flow: fragile
outputs: [greeting]
steps:
  - {id: greet, uses: greet, with: {name: Ada}}
  - {id: boom, uses: explode, with: {text: "{{ context.greeting }}"}}
"""
# the tool `explode` fails: the step after a model call fails
TOOLS = """
def explode(text: str) -> str:
    raise RuntimeError("the fuse is lit")
"""
TOOLS_CONFIG = "tools:\n  explode: {import: 'yardtools:explode'}\n"
