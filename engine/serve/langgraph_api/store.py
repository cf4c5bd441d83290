"""The store (long-term memory): PUT, GET and DELETE /store/items, POST /store/items/search, POST
/store/namespaces — on the same LangGraph store the flows' memory blocks read and write (engine/state/memory.py):
a flow with `memory: {scope: users/ada}` keeps its preferences under ["users", "ada", "preferences"]."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from engine.core.values import JsonDict
from engine.serve.bodies import read_body
from engine.serve.langgraph_api.access import ServerDep, service
from engine.serve.langgraph_api.bodies import NamespaceSearch, StoreDelete, StorePut, StoreSearch
from engine.serve.problems import ApiError
from engine.serve.server import Server, check_size
from engine.state.memory import MemoryStore, is_packed, unpack

router = APIRouter(tags=["langgraph: store"])
MAX_DEPTH = 16  # labels of one namespace
# A filter is {key: value} or {key: {operator: value}}: a key is what the stores allow in their queries
# (letters, digits, `_`, `.` for a nested key, `-`), an operator one the stores know, a value JSON whose
# integers fit 64 bits (the stores compare them as SQL numbers).
FILTER_KEY = re.compile(r"[A-Za-z0-9_.-]{1,200}")
FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
FILTER_KEYS = 64  # keys of one filter
FILTER_DEPTH = 32  # nesting of a value compared whole


def _memory(server: Server) -> MemoryStore:
    return service(server).engine.memory


def _namespace(labels: Sequence[str], where: str, allow_empty: bool = False) -> tuple[str, ...]:
    if not labels and not allow_empty:
        raise ApiError(
            422, "invalid_request", f"{where}: a namespace needs at least one label", field=where
        )
    if len(labels) > MAX_DEPTH:
        raise ApiError(422, "invalid_request", f"{where}: at most {MAX_DEPTH} labels", field=where)
    for label in labels:
        if not label or "." in label:
            raise ApiError(
                422,
                "invalid_request",
                f"{where}: labels are non-empty and hold no '.' (got {label[:80]!r})",
                field=where,
            )
    return tuple(labels)


def _filter_value(value: Any, where: str, depth: int = 0) -> None:
    if depth > FILTER_DEPTH:
        raise ApiError(
            422,
            "invalid_filter",
            f"{where}: nested deeper than {FILTER_DEPTH} levels",
            field="filter",
        )
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ApiError(
                422, "invalid_filter", f"{where}: integers must fit 64 bits", field="filter"
            )
    elif isinstance(value, list):  # text: read_body refused lone surrogates already
        for item in value:
            _filter_value(item, where, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _filter_value(key, where, depth + 1)
            _filter_value(item, where, depth + 1)


def _filter(given: JsonDict | None) -> JsonDict | None:
    """The search's filter, checked before it reaches the store (whose ValueError would be a 500):
    422 `invalid_filter` naming what is wrong."""
    if not given:
        return None
    if len(given) > FILTER_KEYS:
        raise ApiError(422, "invalid_filter", f"filter: at most {FILTER_KEYS} keys", field="filter")
    for key, value in given.items():
        if not FILTER_KEY.fullmatch(key):
            raise ApiError(
                422,
                "invalid_filter",
                f"filter: invalid key {key[:80]!r}: a key holds only letters, "
                "digits, '_', '.' (a nested key) and '-'",
                field="filter",
            )
        if isinstance(value, dict):
            for operator, operand in value.items():
                if operator not in FILTER_OPERATORS:
                    raise ApiError(
                        422,
                        "invalid_filter",
                        f"filter.{key}: unsupported operator {operator[:80]!r}; "
                        f"use one of {', '.join(FILTER_OPERATORS)}",
                        field="filter",
                    )
                _filter_value(operand, f"filter.{key}.{operator}")
        else:
            _filter_value(value, f"filter.{key}")
    return given


def _shown(item: Any) -> Any:
    """An item's value as a client sees it: what a flow's memory wrote is kept as its JSON text
    (engine/state/memory.py, `pack`) and shown as the value again — a preference as {"value": v},
    as flows wrote preferences before."""
    if not is_packed(item.value):
        return item.value
    value = unpack(item.value, preference=False)
    return {"value": value} if item.namespace[-1:] == ("preferences",) else value


def _item(item: Any, with_score: bool = False) -> JsonDict:
    found = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": _shown(item),
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }
    if with_score:
        found["score"] = getattr(item, "score", None)
    return found


@router.put("/store/items", summary="Store an item", status_code=204, response_model=None)
async def put(request: Request, server: ServerDep) -> Response:
    body = await read_body(request, StorePut)
    if body is None:
        raise ApiError(422, "invalid_request", "the body must hold namespace, key and value")
    namespace = _namespace(body.namespace, "namespace")
    check_size(body.value, server.catalog.server.max_input_bytes, "the item's value")
    memory = _memory(server)
    await memory.call(memory.store().put, namespace, body.key, body.value)
    return Response(status_code=204)


@router.get(
    "/store/items", summary="One item, by namespace (labels joined with '.') and key; null if none"
)
async def get(server: ServerDep, key: str, namespace: str = Query("")) -> JsonDict | None:
    labels = _namespace(namespace.split(".") if namespace else [], "namespace")
    memory = _memory(server)
    item = await memory.call(memory.store().get, labels, key)
    # no such item: 200 `null`, as LangGraph's server answers (clients check the item for None / null)
    return _item(item) if item is not None else None


@router.delete("/store/items", summary="Delete an item", status_code=204, response_model=None)
async def delete(request: Request, server: ServerDep) -> Response:
    body = await read_body(request, StoreDelete)
    if body is None:
        raise ApiError(422, "invalid_request", "the body must hold namespace and key")
    memory = _memory(server)
    await memory.call(memory.store().delete, _namespace(body.namespace, "namespace"), body.key)
    return Response(status_code=204)


@router.post(
    "/store/items/search", summary="Items under a namespace prefix, filtered by their values"
)
async def search(request: Request, server: ServerDep) -> JsonDict:
    body = await read_body(request, StoreSearch) or StoreSearch()
    prefix = _namespace(body.namespace_prefix, "namespace_prefix", allow_empty=True)
    wanted = _filter(body.filter)
    memory = _memory(server)

    def find() -> list[Any]:
        found: list[Any] = memory.store().search(
            prefix, filter=wanted, limit=body.limit, offset=body.offset, query=body.query
        )
        return found

    return {"items": [_item(item, with_score=True) for item in await memory.call(find)]}


@router.post("/store/namespaces", summary="The namespaces of the store")
async def namespaces(request: Request, server: ServerDep) -> JsonDict:
    body = await read_body(request, NamespaceSearch) or NamespaceSearch()
    memory = _memory(server)
    prefix = _namespace(body.prefix or [], "prefix", allow_empty=True) or None
    suffix = _namespace(body.suffix or [], "suffix", allow_empty=True) or None

    def find() -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = memory.store().list_namespaces(
            prefix=prefix,
            suffix=suffix,
            max_depth=body.max_depth,
            limit=body.limit,
            offset=body.offset,
        )
        return found

    return {"namespaces": [list(namespace) for namespace in await memory.call(find)]}
