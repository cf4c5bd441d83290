"""Durations longer than the engine's maximum (ten years): `timeout: 3000000d` is a typo, and no
deadline, sleep or socket timeout can be computed from it (docs/flows.md, "Durations").

Duration settings are found from the spec models themselves (every field whose pattern is a
duration), so a new duration setting is covered without a list to keep in step.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.core.diagnostics import Diagnostic
from engine.definitions.load import Document, JsonPath
from engine.definitions.project import Project, is_builtin
from engine.spec.common import MAX_DURATION, MAX_DURATION_DAYS, duration_seconds
from engine.validate.semantic.index import issue

CODE = "BY515"


def check_durations(project: Project) -> list[Diagnostic]:
    """One diagnostic per duration setting beyond the maximum, in blockyard.yaml, blocks and flows."""
    found: list[Diagnostic] = []
    if project.config_doc is not None:
        found.extend(_check(project.config, project.config_doc))
    for versions in project.blocks.values():
        for definition in versions.values():
            if not is_builtin(definition):
                found.extend(_check(definition.spec, definition.doc))
    for flow in project.flows.values():
        found.extend(_check(flow.spec, flow.doc))
    return found


def _check(spec: BaseModel, doc: Document) -> Iterator[Diagnostic]:
    for path, text in _durations(spec, ()):
        try:
            seconds = duration_seconds(text)
        except ValueError:
            continue  # malformed: the schema said so already
        if seconds > MAX_DURATION:
            yield issue(
                doc,
                path,
                CODE,
                f"duration '{_short(text)}' is longer than the maximum of "
                f"{MAX_DURATION_DAYS}d (ten years)",
            )


def _durations(value: Any, path: JsonPath) -> Iterator[tuple[JsonPath, str]]:
    """(path in the document, text) of every duration setting under `value`."""
    if isinstance(value, BaseModel):
        for name, key, duration in _settings(type(value)):
            item = getattr(value, name)
            if item is None:  # not set
                continue
            if duration and isinstance(item, str):
                yield (*path, key), item
            else:
                yield from _durations(item, (*path, key))
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            yield from _durations(item, (*path, position))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _durations(item, (*path, key))


@cache
def _settings(model: type[BaseModel]) -> tuple[tuple[str, str, bool], ...]:
    """The fields of `model` that can be or hold a duration setting: (name, key in the document, whether
    it is a duration itself). Asked once per model: the walk visits every step of every flow."""
    return tuple(
        (name, info.alias or name, _is_duration(model, name))
        for name, info in model.model_fields.items()
        if _may_hold(model, name)
    )


@cache
def _may_hold(model: type[BaseModel], name: str) -> bool:
    """Whether a field can be or contain a duration setting: a duration itself, or a spec model
    somewhere in its type (walking 1,000 flows' plain data cost a fifth of `validate`)."""
    return _is_duration(model, name) or _has_model(model.model_fields[name].annotation)


def _has_model(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_has_model(arg) for arg in typing.get_args(annotation))


@cache
def _is_duration(model: type[BaseModel], name: str) -> bool:
    info = model.model_fields[name]
    return any(_duration_pattern(meta) for meta in [*info.metadata, *_metadata(info.annotation)])


def _metadata(annotation: Any) -> Iterator[Any]:
    """The constraints inside `Annotated[...]`, also within unions (`Duration | None`)."""
    for meta in getattr(annotation, "__metadata__", ()):
        yield meta
        if isinstance(meta, FieldInfo):
            yield from meta.metadata
    for arg in typing.get_args(annotation):
        yield from _metadata(arg)


def _duration_pattern(meta: Any) -> bool:
    pattern = getattr(meta, "pattern", None)
    return isinstance(pattern, str) and pattern.startswith(r"^[0-9]+(\.[0-9]+)?(ms|s")


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else f"{text[:10]}...{text[-4:]}"
