"""Generate the published JSON Schemas from the spec models: `python -m engine.spec.export [DIR]`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo

from engine.core.values import JsonDict
from engine.spec.block import BLOCK_KINDS, BLOCK_MODELS, KIND_KEYS, KIND_REQUIRES, BlockBase
from engine.spec.config import ConfigSpec
from engine.spec.evals import EvalSpec
from engine.spec.flow import (
    ACTION_KEYS,
    ACTIONS,
    ROUTE_CONDITIONS,
    ROUTE_MODELS,
    STEP_MODELS,
    FlowSpec,
    RouteBase,
    StepBase,
)
from engine.spec.flowtest import SuiteFile
from engine.spec.interchange import ReactFlowGraph, TaskPlan


def flat_shape(
    name: str, doc: str, base: type[BaseModel], members: Iterable[type[BaseModel]]
) -> type[BaseModel]:
    """Every member's keys in one model, each of them optional: the shape a published schema starts from
    for a union of models (a block's kinds, a router rule's conditions), before its branches say which
    keys each member must and may say (`kind_branches`, `condition_branches`). An editor (and the
    validator's explanation of a schema error, engine/definitions/schema.py) then sees a key of another
    member as a known key that does not fit, rather than an unknown one."""
    members = list(members)
    said = [
        (key, info)
        for model in members
        for key, info in model.model_fields.items()
        if key not in base.model_fields
    ]
    fields: dict[str, Any] = {}
    for key, info in said:  # a member where the key is optional (smart's prompt) says it as it is
        if not info.is_required():
            fields.setdefault(key, (info.annotation, info))
    everywhere = {key for key, _ in said if all(key in model.model_fields for model in members)}
    # a key every member requires (a rule's goto) stays required
    for key, info in said:
        if key in everywhere and key not in fields:
            fields[key] = (info.annotation, info)
    for key, info in said:  # a key only some members require (tool's tool) becomes optional
        if key not in fields:
            fields[key] = (
                cast(Any, info.annotation) | None,
                FieldInfo.merge_field_infos(info, default=None),
            )
    # in the members' order, a key every member says (a rule's `goto`) after the others
    order = [key for key, _ in said if key not in everywhere]
    order += [key for key, _ in said if key in everywhere]
    fields = {key: fields[key] for key in dict.fromkeys(order)}
    shape: type[BaseModel] = create_model(name, __base__=base, __doc__=doc, **fields)
    return shape


def block_shape() -> type[BaseModel]:
    return flat_shape(
        "BlockSpec", "A block file: blocks/<id>.yaml.", BlockBase, BLOCK_MODELS.values()
    )


def route_shape() -> type[BaseModel]:
    return flat_shape(
        "Route",
        "One router rule: the first rule that matches picks the next step.",
        RouteBase,
        ROUTE_MODELS.values(),
    )


SCHEMAS: dict[str, type[BaseModel]] = {
    "block.schema.json": block_shape(),
    "flow.schema.json": FlowSpec,
    "config.schema.json": ConfigSpec,
    "flowtest.schema.json": SuiteFile,
    "taskplan.schema.json": TaskPlan,
    "reactflow.schema.json": ReactFlowGraph,
    "eval.schema.json": EvalSpec,
}
BASE_ID = "https://blockyard.dev/schemas/"


def build(model: type[BaseModel], filename: str) -> JsonDict:
    schema = model.model_json_schema(by_alias=True, mode="validation")
    _strip(schema)
    _name_keys(schema)
    _bound_integers(schema)
    if filename == "block.schema.json":
        schema["allOf"] = kind_branches()
    if model is FlowSpec:
        _flat_steps(schema)
        schema["$defs"]["StepSpec"]["allOf"] = action_branches()
        _flat_routes(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE_ID + filename,
        **schema,
    }


def _strip(node: Any) -> None:
    """Drop pydantic's auto titles; editors show `description`, which every property has."""
    if isinstance(node, dict):
        node.pop("title", None)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop in value.values():
                    _strip(prop)
            else:
                _strip(value)
    elif isinstance(node, list):
        for item in node:
            _strip(item)


def _name_keys(node: Any) -> None:
    """`dict[Name, X]` becomes propertyNames + additionalProperties, as pydantic enforces it.

    pydantic emits `patternProperties` alone, which lets keys that miss the pattern through
    unchecked; the published schema must reject what the models reject.
    """
    if isinstance(node, dict):
        patterns = node.get("patternProperties")
        if (
            isinstance(patterns, dict)
            and len(patterns) == 1
            and not {"properties", "additionalProperties"} & set(node)
        ):
            pattern, value = next(iter(patterns.items()))
            del node["patternProperties"]
            node["propertyNames"] = {"pattern": pattern}
            node["additionalProperties"] = value
        for value in node.values():
            _name_keys(value)
    elif isinstance(node, list):
        for item in node:
            _name_keys(item)


INT64 = (-(2**63), 2**63 - 1)


def _bound_integers(node: Any) -> None:
    """Every integer within 64 bits unless it says narrower: JSON Schema takes an integral float (9.2e18)
    as an integer, which pydantic turns into one only within 64 bits; the published schema must reject
    what the models reject (the validator's schema check, engine/definitions/schema.py, then names the bound)."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            low, high = INT64
            if "minimum" not in node and "exclusiveMinimum" not in node:
                node["minimum"] = low
            if "maximum" not in node and "exclusiveMaximum" not in node:
                node["maximum"] = high
        for value in node.values():
            _bound_integers(value)
    elif isinstance(node, list):
        for item in node:
            _bound_integers(item)


KIND_BRANCH = (
    "blockyardKind"  # marks a branch kind_branches() wrote (the validator leaves them out: below)
)


def kind_branches() -> list[JsonDict]:
    """One `if kind is X then ...` branch per block kind, from the kinds' models (engine/spec/block.py): the
    keys the kind must say, and the keys of other kinds, which it may not. An editor reading the schema
    then completes and checks a `tool` block's keys apart from an `llm` block's. `blockyard validate`
    reports these rules with their own codes and words (BY350-BY358, BY356): its schema stage
    (engine/definitions/schema.py) leaves the branches out and explains the kind's model's errors."""
    branches = []
    for kind in BLOCK_KINDS:
        required = KIND_REQUIRES.get(kind, ())
        properties: JsonDict = {}
        if "outputs" in required:
            properties["outputs"] = {
                "minProperties": 1,
                "description": f"{_an(kind)} block produces at least one output.",
            }
        if "prompt" in required:
            properties["prompt"] = {
                "anyOf": [{"required": ["user"]}, {"required": ["user_file"]}],
                "description": f"{_an(kind)} block's prompt has a user message.",
            }
        for key, kinds in KIND_KEYS.items():
            if kind not in kinds:
                properties[key] = {
                    "anyOf": [{"type": "null"}, {"const": []}],
                    "description": f"`{key}` does not apply to {_an(kind).lower()} block.",
                }
        chosen = {"const": kind, "description": f"The block is {_an(kind).lower()} block."}
        branches.append(
            {
                "if": {"properties": {"kind": chosen}, "required": ["kind"]},
                "then": {"required": list(required), "properties": properties},
                KIND_BRANCH: kind,
            }
        )
    return branches


def _flat_steps(schema: JsonDict) -> None:
    """A step as one object (each action optional) with a branch per action (`action_branches`), in place
    of the union of the actions' models that pydantic writes: every model has every key of a step, and
    requires its own action's."""
    defs = schema["$defs"]
    names = {f"#/$defs/{model.__name__}" for model in STEP_MODELS.values()}
    first = STEP_MODELS[ACTIONS[0]]
    step = defs[first.__name__]
    # the first action's key as every other action's model writes it: optional (StepBase's field)
    optional = defs[STEP_MODELS[ACTIONS[1]].__name__]["properties"][ACTIONS[0]]
    step["properties"][ACTIONS[0]] = optional
    step["required"] = [key for key in step["required"] if key != ACTIONS[0]]
    step["description"] = (StepBase.__doc__ or "").split("\n")[0]
    for model in STEP_MODELS.values():
        del defs[model.__name__]
    defs["StepSpec"] = step
    _refer(schema, names, "#/$defs/StepSpec")


def _refer(node: Any, members: set[str], ref: str) -> None:
    """Each `oneOf` of exactly the members' references becomes one reference to `ref`."""
    if isinstance(node, dict):
        options = node.get("oneOf")
        if (
            isinstance(options, list)
            and {o.get("$ref") for o in options if isinstance(o, dict)} == members
        ):
            del node["oneOf"]
            node["$ref"] = ref
        for value in node.values():
            _refer(value, members, ref)
    elif isinstance(node, list):
        for item in node:
            _refer(item, members, ref)


def _flat_routes(schema: JsonDict) -> None:
    """A router rule as one object with a branch per condition (`condition_branches`), in place of the
    union of the conditions' models that pydantic writes."""
    defs = schema["$defs"]
    for name in ROUTE_MODELS.values():
        del defs[name.__name__]
    route = route_shape().model_json_schema(by_alias=True, mode="validation")
    _strip(route)
    route["allOf"] = condition_branches()
    defs["Route"] = route
    defs["RouterSpec"]["properties"]["routes"]["items"] = {"$ref": "#/$defs/Route"}


def condition_branches() -> list[JsonDict]:
    """A rule says exactly one condition (BY314): one branch per condition, for editors; the validator
    leaves them to the rules' models (see `kind_branches`)."""

    def said(condition: str) -> JsonDict:
        return {
            "required": [condition],
            "properties": {
                condition: {"type": "string", "description": f"The rule's condition: {condition}."}
            },
        }

    return [
        {"oneOf": [said(condition) for condition in ROUTE_CONDITIONS], KIND_BRANCH: "condition"}
    ]


def action_branches() -> list[JsonDict]:
    """A step does exactly one thing (BY300, BY301), and the keys only some actions read are refused on the
    others (BY317): the same rules as the validator's (engine/validate/semantic/structure.py), by shape,
    for editors (see `kind_branches`)."""

    def given(action: str) -> JsonDict:
        return {
            "required": [action],
            "properties": {
                action: {"not": {"type": "null"}, "description": f"The step's action: {action}."}
            },
        }

    branches: list[JsonDict] = [
        {"oneOf": [given(action) for action in ACTIONS], KIND_BRANCH: "action"}
    ]
    for action in ACTIONS:
        properties = {
            key: {
                "maxProperties": 0,
                "description": f"`{key}` does not apply to a step with `{action}`.",
            }
            for key, actions in ACTION_KEYS.items()
            if action not in actions
        }
        if properties:
            branches.append(
                {"if": given(action), "then": {"properties": properties}, KIND_BRANCH: action}
            )
    return branches


def _an(kind: str) -> str:
    return f"{'An' if kind[0] in 'aeiou' else 'A'} {kind}"


def render(model: type[BaseModel], filename: str) -> str:
    return json.dumps(build(model, filename), indent=2, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / "schemas"
    target.mkdir(parents=True, exist_ok=True)
    for filename, model in SCHEMAS.items():
        (target / filename).write_text(render(model, filename), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
