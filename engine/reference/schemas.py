"""docs/reference/config.md, blocks.md and flows.md: every key of `blockyard.yaml`, a block and a flow, from
the JSON Schemas the spec models publish (engine/spec/export.py builds the same schemas/*.schema.json).

Each object of a schema is one section, headed by the key path where the file first holds it
(`server`, `steps[].router`); a key whose value is such an object links to its section.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from engine.core.values import JsonDict
from engine.reference.markdown import code, from_docs, header, slug, table
from engine.spec.export import INT64, SCHEMAS, build

Schema = JsonDict

# Patterns the spec models share, said in words (a pattern not listed is shown as it is)
PATTERNS = {
    r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)$": "duration",
    r"^[0-9]+(\.[0-9]+)?(ms|s|m)$": "duration (ms, s or m)",
    r"^[A-Za-z_][A-Za-z0-9_-]*$": "name",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "identifier (letters, digits, `_`)",
    r"^[A-Z_][A-Z0-9_]*$": "environment variable name",
    r"^(\*|[A-Za-z0-9_.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?)$": "host (`name`, "
    r"`name:port`, `[::1]:port` or `*`)",
    r"^(/[A-Za-z0-9_~-][A-Za-z0-9_.~-]*)+$": "URL path (`/lg`, `/api/langgraph`)",
    r"^https?://([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$": "web origin (`http://localhost:3000`)",
    r"^https?://[^\s]+$": "http(s) URL",
    r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$": "HTTP header name",
    r"^[^\r\n]*$": "one line of text",
    r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$": "import path (`module.path:function`)",
    r"^postgres(ql)?://": "Postgres URL (`postgresql://...`)",
}
WORDS = (
    "In the type column, a *name* is letters, digits, `_` and `-`, starting with a letter or `_`; a *duration* "
    "is a number and a unit, `500ms`, `30s`, `5m`, `2h` or `1d` (at most ten years); a default of – means unset."
)


class SchemaPage:
    """One schema as Markdown: its objects in the order a reader meets them."""

    def __init__(self, schema: Schema, root_title: str) -> None:
        self.schema = schema
        self.defs: dict[str, Schema] = schema.get("$defs", {})
        self.root_title = root_title
        self.where: dict[
            str, str
        ] = {}  # a $def -> the heading of its section (the path that first reaches it)
        self.also: dict[str, list[str]] = {}  # a $def -> the other paths that reach it

    def _ref(self, node: Schema) -> str | None:
        ref = node.get("$ref")
        return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None

    def _refs_in(self, node: Any, path: str) -> list[tuple[str, str]]:
        """The $defs a key's value reaches (through lists, maps and choices), with the path it has there."""
        if not isinstance(node, dict):
            return []
        name = self._ref(node)
        if name is not None:
            return [(name, path)]
        found: list[tuple[str, str]] = []
        for choice in node.get("anyOf", []):
            found += self._refs_in(choice, path)
        if isinstance(node.get("items"), dict):
            found += self._refs_in(node["items"], path + "[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += self._refs_in(node["additionalProperties"], path + ".NAME")
        return found

    def _order(self) -> list[tuple[str, Schema]]:
        """(heading, object) for the root and every $def it reaches, breadth first."""
        sections: list[tuple[str, Schema]] = [(self.root_title, self.schema)]
        queue: deque[tuple[str, Schema]] = deque([("", self.schema)])
        while queue:
            prefix, node = queue.popleft()
            for key, value in node.get("properties", {}).items():
                for name, path in self._refs_in(value, f"{prefix}{key}"):
                    if name in self.where:
                        if path != self.where[name] and path not in self.also.setdefault(name, []):
                            self.also[name].append(path)
                        continue
                    self.where[name] = path
                    sections.append((path, self.defs[name]))
                    queue.append((path + ".", self.defs[name]))
        return sections

    def kind(self, node: Any) -> str:
        """A value's type in words, linking objects to their section."""
        if not isinstance(node, dict) or not node:
            return "any"
        name = self._ref(node)
        if name is not None:
            return f"[object](#{slug(self.where.get(name, name))})"
        if "anyOf" in node:
            choices = [choice for choice in node["anyOf"] if choice.get("type") != "null"]
            return " or ".join(self.kind(choice) for choice in choices) if choices else "null"
        if "const" in node:
            return code(json.dumps(node["const"]))
        if "enum" in node:
            return "one of " + ", ".join(code(str(value)) for value in node["enum"])
        kind = node.get("type")
        if kind == "array":
            return (
                "list of "
                + self.kind(node.get("items", {}))
                + self._bounds(node, "minItems", "maxItems", "items")
            )
        if kind == "object":
            values = node.get("additionalProperties")
            if isinstance(values, dict):
                keys = node.get("propertyNames", {}).get("pattern")
                return (
                    f"map of {PATTERNS.get(keys, 'text') if keys else 'text'} → {self.kind(values)}"
                )
            return "object"
        words = {
            "string": "text",
            "integer": "integer",
            "number": "number",
            "boolean": "boolean",
        }.get(str(kind), "any")
        if kind == "string" and "pattern" in node:
            # an unnamed pattern is left to the schema: a regular expression is no help in a table
            words = PATTERNS.get(node["pattern"], "text (of the pattern in the schema)")
        return (
            words
            + self._bounds(node, "minimum", "maximum")
            + self._bounds(node, "minLength", "maxLength", "chars")
        )

    @staticmethod
    def _bounds(node: Schema, low: str, high: str, unit: str = "") -> str:
        parts = []
        if low in node and node[low] != INT64[0]:
            # the schema's bounds of every integer: not worth a word
            parts.append(f"≥ {node[low]}")
        if "exclusiveMinimum" in node and low == "minimum":
            parts.append(f"> {node['exclusiveMinimum']}")
        if high in node and node[high] != INT64[1]:
            parts.append(f"≤ {node[high]}")
        if "exclusiveMaximum" in node and high == "maximum":
            parts.append(f"< {node['exclusiveMaximum']}")
        return f" ({', '.join(parts)}{' ' + unit if unit and parts else ''})" if parts else ""

    def _default(self, key: str, node: Schema, required: set[str]) -> str:
        if key in required:
            return "required"
        if "default" not in node or node["default"] is None:
            return "–"
        return code(json.dumps(node["default"], ensure_ascii=False))

    def lines(self) -> list[str]:
        out: list[str] = []
        for heading, node in self._order():
            name = next((n for n, path in self.where.items() if path == heading), None)
            out += [f"## {heading}", ""]
            if node.get("description"):
                out += [from_docs(node["description"]), ""]
            if name is not None and self.also.get(name):
                out += ["Also at " + ", ".join(code(path) for path in self.also[name]) + ".", ""]
            properties = node.get("properties", {})
            required = set(node.get("required", []))
            if properties:
                rows = [
                    [
                        code(key),
                        self.kind(value),
                        self._default(key, value, required),
                        from_docs(value.get("description", "")),
                    ]
                    for key, value in properties.items()
                ]
                out += table(["key", "type", "default", "meaning"], rows)
                if node.get("additionalProperties") is False:
                    out += ["Any other key is an error (BY102).", ""]
            else:
                out += [f"A value of type {self.kind(node)}.", ""]
        return out


PAGES = {
    # page: (schema file, title, what the file is, the page that explains it)
    "config.md": (
        "config.schema.json",
        "`blockyard.yaml` reference",
        "The yard's settings file, `blockyard.yaml` at the yard's root. Every key is optional.",
    ),
    "blocks.md": (
        "block.schema.json",
        "Block file reference",
        "A block file, `blocks/<id>.yaml`: one block. How blocks work: [flows.md](../flows.md#blocks).",
    ),
    "flows.md": (
        "flow.schema.json",
        "Flow file reference",
        "A flow file, `flows/<id>.yaml`: one flow and its steps. How flows work: "
        "[flows.md](../flows.md#flows); the constructs: [flows.md](../flows.md#constructs).",
    ),
}


def page(name: str) -> str:
    filename, title, intro = PAGES[name]
    schema = build(SCHEMAS[filename], filename)
    text = (
        f"{intro} The published JSON Schema is `schemas/{filename}` (editors complete keys from it: "
        "[validation.md](../validation.md#in-the-editor)); `blockyard validate` checks every file against it "
        "before its semantic checks ([codes](codes.md)). " + WORDS
    )
    root = {"config.md": "blockyard.yaml", "blocks.md": "The block", "flows.md": "The flow"}[name]
    lines = (
        header(title, f"engine/spec/ (schemas/{filename})", text) + SchemaPage(schema, root).lines()
    )
    return "\n".join(lines).rstrip() + "\n"
