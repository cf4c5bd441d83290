"""JSON Schema validation of loaded documents, every error at its line and column, in plain words.

jsonschema reports an `anyOf` failure (every optional key is `X | None`) as one error holding the
errors of each alternative. We explain the alternative that has the value's type, with all of its
errors, so a router missing `default` and an unknown key inside it are both reported.

Speed: the schemas are generated from the spec models, so a document that the models accept in
strict mode, by alias only, is valid. pydantic checks that some 30 times faster than jsonschema,
which is therefore imported and run only for documents that need their errors explained (a
property test keeps the two in agreement).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter
from pydantic import ValidationError as ModelError

from engine.core.diagnostics import Diagnostic, did_you_mean
from engine.core.values import JsonDict
from engine.definitions.load import Document
from engine.spec import ConfigSpec, FlowSpec
from engine.spec.block import (
    BLOCK_MODELS,
    BLOCKS,
    KIND_KEYS,
    MISSING_KEY,
    foreign_words,
    missing_words,
)
from engine.spec.evals import EvalSpec
from engine.spec.flow import (
    ACTIONS,
    ROUTE_CONDITIONS,
    no_action_words,
    route_problem,
    said_conditions,
)

if TYPE_CHECKING:
    from jsonschema import Validator
    from jsonschema.exceptions import ValidationError

TOP_KEYS = {"block": "blocks", "flow": "flows"}
MODELS: dict[str, TypeAdapter[Any]] = {
    "block": BLOCKS,  # the union of the kinds' models, keyed by `kind`
    "flow": TypeAdapter(FlowSpec),
    "config": TypeAdapter(ConfigSpec),
    "eval": TypeAdapter(EvalSpec),
}
_RANGE = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
)


def schema_dir() -> Path:
    """Schemas ship inside the wheel (engine/schemas); a source checkout keeps them at the top."""
    packaged = Path(__file__).resolve().parents[1] / "schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "schemas"


@cache
def load_schema(name: str) -> JsonDict:
    """name: block, flow or config."""
    schema: JsonDict = json.loads(
        (schema_dir() / f"{name}.schema.json").read_text(encoding="utf-8")
    )
    return schema


@cache
def _validator(name: str) -> Validator:
    # only to explain errors: see the docstring
    from jsonschema import (
        Draft202012Validator,
        validators,
    )

    # JSON Schema regexes are ECMA-262, where `$` matches only at the very end; Python's `$` also
    # matches before a final newline, which would let 'name\n' through and disagree with the models
    checker = validators.extend(Draft202012Validator, {"pattern": _pattern})  # type: ignore[no-untyped-call]
    validator: Validator = checker(_model_shape(load_schema(name)))
    return validator


def _model_shape(node: Any) -> Any:
    """The schema as the models see it: without the per-kind branches of a block and the per-action branches
    of a step (engine/spec/export.py, marked `blockyardKind`), whose rules the semantic checks report with
    their own codes and words."""
    if isinstance(node, list):
        return [_model_shape(item) for item in node]
    if not isinstance(node, dict):
        return node
    shaped = {key: _model_shape(value) for key, value in node.items() if key != "allOf"}
    rules = node.get("allOf")
    if isinstance(rules, list):
        kept = [
            _model_shape(rule)
            for rule in rules
            if not (isinstance(rule, dict) and "blockyardKind" in rule)
        ]
        if kept:
            shaped["allOf"] = kept
    return shaped


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: JsonDict
) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError  # (see _validator)

    if isinstance(instance, str) and _regex(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def is_valid(data: Any, name: str) -> bool:
    """The fast path: True when the spec model accepts `data` strictly, keys by their YAML names only."""
    return accepted(data, name) is not None


def accepted(data: Any, name: str) -> Any | None:
    """The spec `data` makes when the model accepts it strictly (so it is valid, see the docstring
    above), or None. Strict input is input the lax build would take as it is: the same spec."""
    try:
        return MODELS[name].validate_python(data, strict=True, by_alias=True, by_name=False)
    except ModelError:
        return None
    except TypeError:  # pydantic < 2.11 has no by_name; the slow path is always right
        return None


def check(doc: Document, name: str) -> list[Diagnostic]:
    """All schema errors of `doc` against schema `name` (block, flow, config), one per problem."""
    data = doc.data
    if not isinstance(data, dict):
        expected = (
            "a mapping of settings"
            if name == "config"
            else f"a mapping with a '{name}:' key at the top"
        )
        return [doc.diag((), "BY101", f"expected {expected}, found {_describe(data)}")]
    misplaced = _misplaced(doc, name)
    if misplaced is not None:
        return [misplaced]
    if is_valid(data, name):
        return []
    found: set[Diagnostic] = set()
    for error in _validator(name).iter_errors(data):
        found.update(_explain(doc, error))
    return sorted(found)


def model_errors(doc: Document, name: str, error: ModelError) -> list[Diagnostic]:
    """The errors of a document the schema check passed but the model refused: the rules of the unions the
    schema stage leaves to the models, each with its own code and words. For a block, its kind's model
    (engine/spec/block.py): a key the kind needs (BY350-BY355) or a key of another kind (BY356); for a
    flow, a step that says no action (BY300) and a router rule with no condition or several (BY314)
    (engine/spec/flow.py)."""
    found: list[Diagnostic] = []
    for problem in error.errors():
        loc = tuple(part for part in problem["loc"] if isinstance(part, str | int))
        if name == "block" and loc and loc[0] in BLOCK_MODELS:
            kind, loc = str(loc[0]), loc[1:]
            # a required key left null is as good as missing (`tool: null`): the kind's own words
            kind_error = "missing" if problem.get("input", ...) is None else problem["type"]
            said = _kind_rule(doc, kind, loc, kind_error)
            if said is not None:
                found.append(said)
                continue
        if name == "flow":
            loc = _untagged(loc)
            rule = _route_rule(doc, loc, problem["type"])
            if rule is None:
                rule = _step_rule(doc, loc, problem["type"])
            if (
                rule is not None
            ):  # [] for a rule's third condition: its second one reported the rule
                found.extend(rule)
                continue
        found.append(doc.diag(loc, "BY100", problem["msg"]))
    return found


def _untagged(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """A location in the document: pydantic puts the chosen condition's name after a router rule's
    position (`routes, 2, contains, equals`), and the chosen action's after a step's (`steps, 0, loop,
    loop, ...`), which the document does not have."""
    kept: list[str | int] = []
    for position, part in enumerate(loc):
        listed = loc[position - 2] if position >= 2 and isinstance(loc[position - 1], int) else None
        if not (
            (listed == "routes" and part in ROUTE_CONDITIONS)
            or (listed == "steps" and part in ACTIONS)
        ):
            kept.append(part)
    return tuple(kept)


def _step_rule(doc: Document, loc: tuple[str | int, ...], error: str) -> list[Diagnostic] | None:
    """A step that says no action (BY300): a step's model is chosen by the action it says."""
    if error != "union_tag_not_found" or len(loc) < 2 or loc[-2] != "steps":
        return None
    step = _at(doc.data, loc)
    name = step.get("id") if isinstance(step, dict) else None
    return [doc.diag((*loc, "id"), "BY300", no_action_words(_show(name)))]


def _route_rule(doc: Document, loc: tuple[str | int, ...], error: str) -> list[Diagnostic] | None:
    """A router rule that says no condition, or several (BY314): the rule's model is chosen by the one it
    says (engine/spec/flow.py)."""
    at = next(
        (
            i
            for i in range(len(loc) - 1, 1, -1)
            if loc[i - 1] == "routes" and isinstance(loc[i], int)
        ),
        None,
    )
    if at is None or loc[at - 2] != "router":
        return None
    rule, extra = loc[: at + 1], loc[at + 1 :]
    said = said_conditions(_at(doc.data, rule))
    step = _at(doc.data, loc[: at - 2])
    words = route_problem(
        str(step.get("id")) if isinstance(step, dict) else "?", int(loc[at]) + 1, said
    )
    if error == "union_tag_not_found" and not extra:
        return [doc.diag(rule, "BY314", words)]
    if error == "extra_forbidden" and len(extra) == 1 and extra[0] in said:
        # one report per rule, at its second condition, naming them all
        return [doc.diag((*rule, said[1]), "BY314", words, key=True)] if extra[0] == said[1] else []
    return None


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    """The part of a document at `path`, or None where the document has no such part."""
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _kind_rule(
    doc: Document, kind: str, loc: tuple[str | int, ...], error: str
) -> Diagnostic | None:
    if len(loc) != 1 or not isinstance(loc[0], str):
        return None
    key = loc[0]
    block = f"block '{_show(doc.data.get('block'))}': "
    if error == "missing" and key in MISSING_KEY:
        code, message = missing_words(kind, key)
        return doc.diag(("kind",), code, block + message)
    if error == "extra_forbidden" and key in KIND_KEYS:
        return doc.diag((key,), "BY356", block + foreign_words(kind, key), key=True)
    return None


def _misplaced(doc: Document, name: str) -> Diagnostic | None:
    """A block file among the flows (or the reverse) gets one clear message, not twenty unknown keys."""
    for other, folder in TOP_KEYS.items():
        if other != name and other in doc.data and name not in doc.data:
            here = "blockyard.yaml" if name == "config" else f"the {TOP_KEYS[name]} folder"
            value = _show(doc.data[other])
            return doc.diag(
                (other,),
                "BY108",
                f"this file defines {other} '{value}'; {folder} belong in the "
                f"{folder} folder, not in {here}",
                key=True,
            )
    return None


def _explain(doc: Document, error: ValidationError) -> list[Diagnostic]:
    path = tuple(error.absolute_path)
    kind: Any = error.validator
    schema = _schema_of(error)
    rule: Any = error.validator_value  # what the failed keyword holds: a list, a pattern, a bound
    instance: Any = error.instance
    if kind == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        extras = [key for key in instance if key not in allowed]
        return [
            doc.diag(
                (*path, key),
                "BY102",
                f"unknown key '{_show(key)}'{_where(path)}{did_you_mean(key, allowed)}",
                key=True,
            )
            for key in extras
        ]
    if kind == "required":
        missing = [key for key in rule if key not in instance]
        props = schema.get("properties", {})
        return [
            doc.diag(
                path,
                "BY103",
                f"missing required key '{key}'{_where(path)}{_choices(props.get(key))}",
                key=True,
            )
            for key in missing
        ]
    if kind == "type":
        return [
            doc.diag(
                path,
                "BY104",
                f"{_name(path)} must be {_option_type(schema)}, "
                f"not {_describe(instance)}{_shorthand(error)}",
            )
        ]
    if kind == "enum":
        options = ", ".join(str(v) for v in rule)
        hint = did_you_mean(str(instance), [str(v) for v in rule])
        return [
            doc.diag(
                path,
                "BY105",
                f"{_name(path)} is '{_show(instance)}'; expected one of: {options}{hint}",
            )
        ]
    if kind == "const":
        return [doc.diag(path, "BY105", f"{_name(path)} must be '{rule}'")]
    if (
        kind == "pattern"
        and len(error.schema_path) > 1
        and error.schema_path[-2] == "propertyNames"
    ):
        bad = instance
        return [
            doc.diag(
                (*path, bad),
                "BY106",
                f"name '{_show(bad)}'{_where(path)} is not valid: {_pattern_help(rule)}",
                key=True,
            )
        ]
    if kind == "pattern":
        return [
            doc.diag(
                path,
                "BY106",
                f"{_name(path)} '{_show(instance)}' is not valid: {_pattern_help(rule)}",
            )
        ]
    if kind in ("anyOf", "oneOf"):
        return _alternatives(doc, error)
    if kind in _RANGE:
        return [doc.diag(path, "BY107", _range(path, kind, rule, instance))]
    return [doc.diag(path, "BY100", f"{_name(path)}: {error.message}")]


def _schema_of(error: ValidationError) -> JsonDict:
    """The (sub)schema an error is about: always an object in our published schemas."""
    return dict(error.schema) if isinstance(error.schema, Mapping) else {}


def _choices(prop: Any) -> str:
    if isinstance(prop, dict) and isinstance(prop.get("enum"), list):
        return f" (one of: {', '.join(map(str, prop['enum']))})"
    return ""


def _shorthand(error: ValidationError) -> str:
    """`text: string` where a type declaration is expected: show the mapping the author meant."""
    declared = _schema_of(error).get("properties", {}).get("type", {})
    if isinstance(error.instance, str) and error.instance in declared.get("enum", ()):
        return f"; write {{type: {error.instance}}}"
    return ""


def _alternatives(doc: Document, error: ValidationError) -> list[Diagnostic]:
    """Explain the alternative that fits the value's type; if none does, say which types would."""
    path = tuple(error.absolute_path)
    rule: Any = error.validator_value
    options = [o for o in rule if isinstance(o, dict)]
    by_option: dict[int, list[ValidationError]] = {i: [] for i in range(len(options))}
    for sub in error.context:
        by_option.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    fitting = [i for i, subs in by_option.items() if not any(_wrong_type(e) for e in subs)]
    if not fitting:
        wanted = [_option_type(o) for o in options]
        # `X | None` reads as "X" to an author: the key can simply be left out
        shown = [w for w in dict.fromkeys(wanted) if w != "empty"] or ["empty"]
        return [
            doc.diag(
                path,
                "BY104",
                f"{_name(path)} must be {_join_types(shown)}, not {_describe(error.instance)}",
            )
        ]
    if len(fitting) > 1 and all(_is_value_rule(e) for i in fitting for e in by_option[i]):
        return [_value_choices(doc, path, error.instance, [options[i] for i in fitting])]
    best = min(fitting, key=lambda i: len(by_option[i]))
    found: list[Diagnostic] = []
    for sub in by_option[best]:
        found.extend(_explain(doc, sub))
    return found


def _wrong_type(error: ValidationError) -> bool:
    return error.validator == "type" and not error.relative_path


def _is_value_rule(error: ValidationError) -> bool:
    return not error.relative_path and error.validator in ("pattern", "const", "enum")


def _value_choices(
    doc: Document, path: tuple[Any, ...], value: Any, options: list[JsonDict]
) -> Diagnostic:
    """One message for a string that matches none of several string alternatives (e.g. a step id or 'fail')."""
    words: list[str] = []
    literals: list[str] = []
    for option in options:
        if "const" in option:
            literals.append(str(option["const"]))
        elif "enum" in option:
            literals.extend(str(v) for v in option["enum"])
        elif "pattern" in option:
            words.append(_pattern_noun(option["pattern"]))
    expected = _join([*(f"'{v}'" for v in literals), *words])
    hint = did_you_mean(str(value), literals)
    return doc.diag(path, "BY105", f"{_name(path)} is '{_show(value)}'; expected {expected}{hint}")


def _option_type(option: JsonDict) -> str:
    if option.get("type") == "string" and "pattern" in option:
        return _pattern_noun(option["pattern"])
    if "type" in option:
        return _types(option["type"])
    if "$ref" in option or "properties" in option:
        return "a mapping"
    return "a value"


def _range(path: tuple[Any, ...], kind: str, limit: Any, value: Any) -> str:
    name = _name(path)
    if kind == "minItems":
        return f"{name} must not be empty" if limit == 1 else f"{name} needs at least {limit} items"
    if kind == "maxItems":
        return f"{name} has {len(value)} items; at most {limit} are allowed"
    if kind == "minLength":
        return (
            f"{name} must not be empty"
            if limit == 1
            else f"{name} needs at least {limit} characters"
        )
    if kind == "maxLength":
        return f"{name} is {len(value)} characters long; at most {limit} are allowed"
    if kind in ("minProperties", "maxProperties"):
        return f"{name} needs {'at least' if kind.startswith('min') else 'at most'} {limit} keys"
    bound = {
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMinimum": "more than",
        "exclusiveMaximum": "less than",
    }[kind]
    return f"{name} is {value}; it must be {bound} {limit}"


def _pattern_help(pattern: str) -> str:
    if "ms|s|m" in pattern:
        return "use a duration such as 500ms, 30s, 5m or 2h"
    if pattern.startswith("^https?://"):
        return "use an origin such as http://localhost:3000 (scheme, host and port; no path, no trailing '/')"
    if "A-Za-z_" in pattern and ":" in pattern:
        return "use module:function"
    if pattern.startswith("^[A-Z_]"):
        return "use an environment variable name such as OPENAI_API_KEY"
    return "names start with a letter or '_' and contain only letters, digits, '_' and '-'"


def _pattern_noun(pattern: str) -> str:
    if "ms|s|m" in pattern:
        return "a duration such as 30s"
    return "a name (a letter or '_', then letters, digits, '_' or '-')"


def _where(path: tuple[Any, ...]) -> str:
    return f" in {_name(path)}" if path else ""


def _name(path: tuple[Any, ...]) -> str:
    if not path:
        return "the document"
    text = ""
    for part in path:
        text += (
            f"[{part}]" if isinstance(part, int) else (f".{_show(part)}" if text else _show(part))
        )
    return f"'{text}'"


_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "empty",
}


def _types(value: Any) -> str:
    if isinstance(value, list):
        return _join([_TYPE_WORDS.get(v, str(v)) for v in value])
    return _TYPE_WORDS.get(value, str(value))


def _join_types(words: list[str]) -> str:
    # "true or false or a mapping" reads badly; "true, false or a mapping" does not
    return _join(
        [
            part
            for word in words
            for part in (word.split(" or ") if word == "true or false" else [word])
        ]
    )


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _show(value: Any, limit: int = 60) -> str:
    """An author's text inside a one-line message: control characters escaped, long text shortened."""
    text = "".join(
        ch.encode("unicode_escape").decode("ascii")
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        else ch
        for ch in str(value)
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string '{_show(value)}'" if len(value) < 40 else "a string"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "nothing" if value is None else type(value).__name__
