"""Schema-valid fake values derived from a seed, for the offline mock model.

Every choice (enum member, number, boolean, list length) comes from a hash of the seed and the
value's path, so the same inputs always give the same output and different inputs usually give
different ones. Strings read like "<block>: <summary of the inputs>".
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from engine.core.values import JsonDict

_SUMMARY_LIMIT = 80
_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00Z",
    "email": "mock@example.com",
    "uri": "https://example.com/mock",
    "url": "https://example.com/mock",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
}


def seed_of(block: str, inputs: JsonDict) -> str:
    """A stable digest of a block and its inputs."""
    text = json.dumps([block, inputs], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def summarize(inputs: JsonDict) -> str:
    """'name=Ada, count=3' — short, for humans reading mock output."""
    if not inputs:
        return "no inputs"
    parts = [f"{key}={_short(value)}" for key, value in sorted(inputs.items())]
    text = ", ".join(parts)
    return text if len(text) <= _SUMMARY_LIMIT else text[: _SUMMARY_LIMIT - 3] + "..."


def fake(
    schema: JsonDict,
    *,
    seed: str,
    label: str,
    root: JsonDict | None = None,
    path: str = "",
) -> Any:
    """A value valid against schema (for the JSON Schema subset blocks produce)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = list(schema["enum"])
        return options[_pick(seed, path, len(options))]
    for combinator in ("oneOf", "anyOf"):
        if schema.get(combinator):
            return fake(schema[combinator][0], seed=seed, label=label, root=root, path=path)
    if schema.get("allOf"):
        merged: JsonDict = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, root))
        merged.update({k: v for k, v in schema.items() if k != "allOf"})
        return fake(merged, seed=seed, label=label, root=root, path=path)
    kind = _type(schema)
    maker = _MAKERS.get(kind, _string)
    return maker(schema, seed, label, root, path)


def _type(schema: JsonDict) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        non_null = [t for t in declared if t != "null"]
        return non_null[0] if non_null else "null"
    if isinstance(declared, str):
        return declared
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"


def _string(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> str:
    text = _FORMATS.get(schema.get("format", ""), label)
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    if len(text) < low:
        text = text + "." * (low - len(text))
    if high is not None and len(text) > int(high):
        text = text[: int(high)]
    return text


def _integer(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> int:
    low, high = _bounds(schema, default=(0, 100), step=1)
    step = schema.get("multipleOf", 1)
    step = int(step) if isinstance(step, int) and step > 0 else 1
    first = math.ceil(math.ceil(low) / step) * step
    count = max((math.floor(high) - first) // step + 1, 1)
    return int(first + step * _pick(seed, path, count))


def _number(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> float | int:
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        low, high = _bounds(schema, default=(0.0, 100.0 * step), step=step)
        first = math.ceil(low / step)
        count = max(math.floor(high / step) - first + 1, 1)
        value = (first + _pick(seed, path, count)) * step
        return int(value) if float(value).is_integer() else value
    low, high = _bounds(schema, default=(0.0, 1.0), step=0.01)
    fraction = _pick(seed, path, 10_001) / 10_000
    return round(low + (high - low) * fraction, 4) if high > low else low


def _boolean(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> bool:
    return _pick(seed, path, 2) == 1


def _null(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> None:
    return None


def _array(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> list[Any]:
    low = int(schema.get("minItems", 0))
    high = int(schema.get("maxItems", max(low, 3)))
    count = min(max(low, 1 + _pick(seed, path + "#n", 3)), high)
    items_of = schema.get("items")
    item_schema: JsonDict = items_of if isinstance(items_of, dict) else {}
    items: list[Any] = []
    salt = 0
    while len(items) < count and salt < count * 4:
        item = fake(
            item_schema,
            seed=seed,
            label=f"{label} #{len(items) + 1}",
            root=root,
            path=f"{path}[{salt}]",
        )
        salt += 1
        if schema.get("uniqueItems") and item in items:
            continue
        items.append(item)
    return items


def _object(schema: JsonDict, seed: str, label: str, root: JsonDict, path: str) -> JsonDict:
    properties = schema.get("properties") or {}
    out: JsonDict = {}
    for name, sub in properties.items():
        out[name] = fake(
            sub if isinstance(sub, dict) else {},
            seed=seed,
            label=label,
            root=root,
            path=f"{path}.{name}",
        )
    for name in schema.get("required", []):
        out.setdefault(name, label)
    return out


_MAKERS = {
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": _boolean,
    "null": _null,
    "array": _array,
    "object": _object,
}


def _bounds(schema: JsonDict, *, default: tuple[float, float], step: float) -> tuple[float, float]:
    low: float | None = schema.get("minimum")
    if "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"] + step
    high: float | None = schema.get("maximum")
    if "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"] - step
    if high is None:
        if low is None:
            return default
        high = max(default[1], low)
    elif low is None:
        low = min(default[0], high)
    return float(low), float(max(high, low))


def _pick(seed: str, path: str, count: int) -> int:
    if count <= 1:
        return 0
    digest = hashlib.sha256(f"{seed}|{path}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def _resolve(schema: Any, root: JsonDict) -> JsonDict:
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, dict) else {}
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _short(value: Any) -> str:
    if isinstance(value, str):
        return value if len(value) <= 24 else value[:21] + "..."
    if isinstance(value, list):
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        return "{" + ",".join(list(value)[:3]) + (",..." if len(value) > 3 else "") + "}"
    return json.dumps(value, default=str)
