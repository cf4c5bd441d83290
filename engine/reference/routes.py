"""docs/reference/routes.md: every HTTP route of `blockyard serve`, from the OpenAPI document of the
FastAPI app (engine/serve/app.py `create_app`): its summary, parameters and request body."""

from __future__ import annotations

import tempfile
from pathlib import Path

from engine.core.values import JsonDict
from engine.reference.markdown import code, from_docs, header, slug, table
from engine.serve.app import create_app
from engine.serve.server import Settings

INTRO = (
    "The routes of `blockyard serve`, as its OpenAPI document (`/openapi.json`, browsable at `/docs` of a "
    "running server) describes them. Answers, errors and their codes, streaming, approvals over HTTP: "
    "[serve.md](../serve.md#http-api); the LangGraph Server API the server also speaks under "
    "`server.langgraph_prefix` (`/lg`): [langgraph-api.md](../langgraph-api.md#endpoints). Besides these, "
    "`GET /` is the web page and `/static/` its files."
)

Node = JsonDict


def openapi() -> Node:
    """The app's OpenAPI document; building the app reads no yard and opens no database."""
    with tempfile.TemporaryDirectory() as folder:
        return create_app(Settings(root=Path(folder))).openapi()


def _kind(schema: Node) -> str:
    if "anyOf" in schema:
        return " or ".join(
            _kind(choice) for choice in schema["anyOf"] if choice.get("type") != "null"
        )
    if "enum" in schema:
        return "one of " + ", ".join(code(str(value)) for value in schema["enum"])
    kind = {
        "string": "text",
        "integer": "integer",
        "number": "number",
        "boolean": "boolean",
        "array": "list",
        "object": "object",
    }.get(str(schema.get("type")), "any")
    bounds = [
        f"{sign} {schema[key]}"
        for key, sign in (("minimum", "≥"), ("maximum", "≤"))
        if key in schema
    ]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(schema: Node, required: bool) -> str:
    if required:
        return "required"
    return (
        code(repr(schema["default"]).replace("True", "true").replace("False", "false"))
        if schema.get("default") is not None
        else "–"
    )


def _operation(method: str, path: str, operation: Node) -> list[str]:
    title = f"{method.upper()} {path}"
    lines = [f"### `{title}`", "", from_docs(operation.get("summary", "")) + ".", ""]
    if operation.get("description"):
        lines += [from_docs(operation["description"]), ""]
    rows = [
        [
            code(param["name"]),
            param["in"],
            _kind(param.get("schema", {})),
            _default(param.get("schema", {}), bool(param.get("required"))),
            from_docs(param.get("description", "")),
        ]
        for param in operation.get("parameters", [])
    ]
    if rows:
        lines += table(["parameter", "in", "type", "default", "meaning"], rows)
    body = (
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema")
    )
    if body:
        needed = set(body.get("required", []))
        fields = [
            [
                code(key),
                _kind(value),
                _default(value, key in needed),
                from_docs(value.get("description", "")),
            ]
            for key, value in body.get("properties", {}).items()
        ]
        lines += [
            "Body (JSON"
            + ("" if operation["requestBody"].get("required") else ", optional")
            + "):",
            "",
        ]
        lines += table(["key", "type", "default", "meaning"], fields)
    return lines


def page() -> str:
    document = openapi()
    operations: dict[str, list[tuple[str, str, Node]]] = {}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["server"])[0]
            operations.setdefault(tag, []).append((method, path, operation))
    lines = header("HTTP route reference", "the OpenAPI document of engine/serve/app.py", INTRO)
    lines += table(
        ["route", "what it does"],
        [
            [
                f"[`{method.upper()} {path}`](#{slug(f'`{method.upper()} {path}`')})",
                from_docs(operation.get("summary", "")),
            ]
            for group in operations.values()
            for method, path, operation in group
        ],
    )
    for tag, group in operations.items():
        lines += [f"## {tag}", ""]
        for method, path, operation in group:
            lines += _operation(method, path, operation)
    return "\n".join(lines).rstrip() + "\n"
