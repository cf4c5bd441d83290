"""The spec models' default factories are plain functions (or spec models): every `blockyard` command
builds the models as it starts, and pydantic asks each default factory for its signature, which a
builtin such as `dict` or `list` answers slowly (engine/spec/common.py, `empty_list`)."""

from __future__ import annotations

import inspect
from types import ModuleType

from pydantic import BaseModel

from engine.spec import block, common, config, flow, flowtest, interchange

MODULES: tuple[ModuleType, ...] = (common, block, flow, config, flowtest, interchange)


def _models() -> list[type[BaseModel]]:
    return [
        value
        for module in MODULES
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, BaseModel)
        and value.__module__ == module.__name__
    ]


def test_default_factories_are_plain_functions() -> None:
    slow = [
        f"{model.__name__}.{name}: {info.default_factory!r}"
        for model in _models()
        for name, info in model.model_fields.items()
        if info.default_factory is not None
        and not inspect.isfunction(info.default_factory)
        and not (
            isinstance(info.default_factory, type) and issubclass(info.default_factory, BaseModel)
        )
    ]
    assert slow == []
