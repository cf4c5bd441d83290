"""Token streaming of model replies: the text a reply carries, handed on as it arrives.

A reply carries text in two places: its content (a chat answer), and — for structured output —
the JSON arguments of the function call that holds the block's outputs. When the outputs are a
single text field (`text_field`), that field's value is decoded from the arguments as they
stream (`FieldText`), so `{"answer": "Hel` already yields `Hel`. Content that opens with `{` is
read the same way (a model answering the JSON in its content); other content is text as it is.
No LangChain here: providers feed the pieces (engine/models/providers/chat.py), docs/models.md
("Token streaming") says what is streamed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

TokenSink = Callable[[str], None]


def text_field(schema: Mapping[str, Any]) -> str | None:
    """The output whose text is streamed: the only property of an outputs schema, when it is text."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    ((name, spec),) = properties.items()
    return name if isinstance(spec, dict) and spec.get("type") == "string" else None


class FieldText:
    """Decodes, piece by piece, the value of one top-level string field of a JSON object being
    received; everything else of the object is skipped. Escapes split across pieces wait for
    their end (a surrogate pair for its second half)."""

    def __init__(self, field: str) -> None:
        self.field = field
        self._state = "scan"  # scan | value | done
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._string: list[str] = []  # the current string at depth 1 (a key, maybe)
        self._last: str | None = None  # the last complete string at depth 1
        self._key: str | None = None  # the key whose value comes next
        self._escape = ""  # an escape of the value, not complete yet

    def feed(self, piece: str) -> str:
        out: list[str] = []
        for char in piece:
            if self._state == "value":
                self._value(char, out)
            elif self._state == "scan":
                self._scan(char)
        return "".join(out)

    def _value(self, char: str, out: list[str]) -> None:
        if self._escape:
            if self._unpaired(char):  # a high surrogate not followed by \uXXXX
                out.append("\ufffd")
                self._escape = self._escape[6:]  # "" or the backslash of another escape
                self._value(char, out)
                return
            self._escape += char
            if self._escape_complete():
                out.append(_decoded(self._escape))
                self._escape = ""
        elif char == "\\":
            self._escape = char
        elif char == '"':
            self._state = "done"
        else:
            out.append(char)

    def _unpaired(self, char: str) -> bool:
        escape = self._escape
        if len(escape) not in (6, 7) or escape[1] != "u" or not _high(escape[2:6]):
            return False
        return char != ("\\" if len(escape) == 6 else "u")

    def _escape_complete(self) -> bool:
        escape = self._escape
        if len(escape) < 2:
            return False
        if escape[1] != "u":
            return True
        if len(escape) < 6:
            return False
        return not _high(escape[2:6]) or len(escape) >= 12

    def _scan(self, char: str) -> None:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
                if self._depth == 1:
                    self._last = "".join(self._string)
                return
            if self._depth == 1:
                self._string.append(char)
            return
        if char.isspace():
            return
        if self._key is not None:  # the first character of a value
            key, self._key = self._key, None
            if key == self.field and self._depth == 1 and char == '"':
                self._state = "value"
                return
        if char == '"':
            self._in_string = True
            self._string = []
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
        elif char == ":" and self._depth == 1:
            self._key = self._last


def _high(hex_digits: str) -> bool:
    try:
        return 0xD800 <= int(hex_digits, 16) <= 0xDBFF
    except ValueError:
        return False


def _decoded(escape: str) -> str:
    """One JSON escape as text; what is not valid (or a lone surrogate) becomes U+FFFD."""
    try:
        text = json.loads(f'"{escape}"')
    except ValueError:
        return "\ufffd"
    return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)


class ReplyStream:
    """Routes the pieces of one streamed reply to `on_token`: content text, and the text field of
    calls of `tool` (the function holding the outputs) when `field` is given."""

    def __init__(self, on_token: TokenSink, *, tool: str | None, field: str | None) -> None:
        self.on_token = on_token
        self.tool = tool
        self.field = field
        self._content: FieldText | None = None
        self._content_kind: str | None = None  # text | json, decided by the first character
        self._calls: dict[Any, tuple[str | None, FieldText | None]] = {}

    def content(self, text: str) -> None:
        if not text:
            return
        if self._content_kind is None:
            stripped = text.lstrip()
            if not stripped:
                return
            self._content_kind = "json" if stripped.startswith("{") else "text"
            if self._content_kind == "json" and self.field is not None:
                self._content = FieldText(self.field)
        if self._content_kind == "text":
            self.on_token(text)
        elif self._content is not None:
            self._send(self._content.feed(text))

    def arguments(self, index: Any, name: str | None, text: str | None) -> None:
        """A piece of a tool call's arguments (`name` is given with the call's first piece)."""
        known, decoder = self._calls.get(index, (None, None))
        if known is None and name:
            known = name
            decoder = (
                FieldText(self.field) if self.field is not None and name == self.tool else None
            )
            self._calls[index] = (known, decoder)
        if decoder is not None and text:
            self._send(decoder.feed(text))

    def _send(self, text: str) -> None:
        if text:
            self.on_token(text)
