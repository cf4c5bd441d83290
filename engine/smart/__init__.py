"""Smart blocks: a DSPy program built from a block's inputs and outputs (the optional extra `dspy`).

`program.py` turns a block into a DSPy signature and module (`mode: predict | chain_of_thought`),
loads the compiled program `blockyard optimize` saved next to the block, and checks predictions
against the guardrails; `lm.py` gives DSPy a language model for the block's model profile (DSPy's
own DummyLM for the offline mock); `optimize.py` is the `blockyard optimize` command. DSPy is
imported only when a smart block predicts, a compiled program is loaded, or a block is optimized:
validate, and compiling a smart block without a compiled program, never load it.
"""

from __future__ import annotations

import importlib.util
import os

from engine.core import extras

EXTRA = "dspy"


def needs_dspy(what: str) -> str:
    """`{what} needs DSPy, and the dspy extra is not installed: pip install 'dspy>=2.6'`."""
    return f"{what} needs DSPy, and {extras.missing(EXTRA)}"


def dspy_installed() -> bool:
    return importlib.util.find_spec("dspy") is not None


def import_dspy() -> object:
    """dspy, imported without the network (LiteLLM would fetch a model price list on import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import dspy  # the optional extra: only when a smart block predicts, loads a program or is optimized

    return dspy
