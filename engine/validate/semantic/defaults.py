"""BY360: a declared `default:` must be a value of its own declaration (type, enum, items, properties).

The rule is the run's own (`engine.spec.typecheck.check_value`): a flow input's default that does not fit
would refuse every run that leaves the input out, a block input's or output's would fail its step, an
approval field's would fail the gate's decision on timeout.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.definitions.load import JsonPath
from engine.spec import TypeSpec
from engine.spec.typecheck import check_value


def default_problems(decl: TypeSpec, path: JsonPath, name: str) -> Iterator[tuple[JsonPath, str]]:
    """(where, what is wrong) for each default in `decl` (at `path`, the value `name`) that does not fit its
    declaration: its own, then those of its items and properties. What is wrong names the value, e.g.
    "'n' must be an integer, got string 'abc'"."""
    if decl.has_default:
        problem = check_value(decl.default, decl, name)
        if problem is not None:
            yield (*path, "default"), problem
    if decl.items is not None:
        yield from default_problems(decl.items, (*path, "items"), f"{name}[]")
    for key, sub in (decl.properties or {}).items():
        yield from default_problems(sub, (*path, "properties", key), f"{name}.{key}")
