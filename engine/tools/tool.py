"""A tool: a name, a description for models, a JSON Schema of its arguments, and a function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.core.values import JsonDict


@dataclass(frozen=True)
class Tool:
    """A callable offered to blocks and agents; `func` (sync or async) takes keyword arguments."""

    name: str
    description: str
    parameters: JsonDict = field(repr=False)
    func: Callable[..., Any] = field(repr=False)
