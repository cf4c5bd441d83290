"""YAML -> JSON-shaped data with a position for every value.

Untrusted input: only the YAML 1.2 core schema is understood (`yes`/`no`/`on`/`off` stay
strings), Python and custom tags are refused, duplicate keys are errors, and alias, size and
depth bombs are stopped before they cost memory or a crash (libyaml's own composer recurses in
C and segfaults on deep nesting, so we compose from the event stream ourselves). Too deep a document
is BY005 at the collection that goes deeper than MAX_DEPTH whichever parser reads it, even when
libyaml's own nesting cap trips first (`_Composer.too_deep`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.core.diagnostics import Diagnostic
from engine.core.values import INT_MAX, INT_MIN, INT_RANGE, JsonDict, ValueDomainError, text_problem
from engine.definitions.files import Bounds, Refused, TooLarge, read_bytes

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 100_000  # counting every alias expansion

JsonPath = tuple[str | int, ...]

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_CORE = "tag:yaml.org,2002:"
_INT = re.compile(r"[-+]?[0-9]+")
_OCT = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INF = re.compile(r"[-+]?\.(inf|Inf|INF)")
_NAN = re.compile(r"\.(nan|NaN|NAN)")
_NULLS = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE"}
# the first characters of every plain scalar that resolves to something else than text (a null, a
# boolean, a number): most scalars start with another one and need no pattern tried at all
_NOT_TEXT_START = frozenset("~nNtTfF+-.0123456789")
# the parser's own nesting cap (libyaml >= 0.2.6: "exceeded maximum nesting depth"); see _Composer.too_deep
_NESTING_CAP = re.compile(r"nest(ed|ing)\b.*\b(depth|level)|too deep", re.IGNORECASE)


@dataclass
class Document:
    """A parsed file: its data and the 1-based (line, col) of every value and mapping key."""

    path: Path
    display: str
    data: Any
    marks: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    key_marks: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: JsonPath, *, key: bool = False) -> tuple[int, int]:
        """Position of the value at `path` (or its key), falling back to the nearest parent."""
        table = self.key_marks if key else self.marks
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if key and probe in self.marks:
                return self.marks[probe]
            probe = probe[:-1]
        return self.marks.get((), (1, 1))

    def diag(
        self, path: JsonPath, code: str, message: str, *, key: bool = False, severity: str = "error"
    ) -> Diagnostic:
        line, col = self.where(path, key=key)
        return Diagnostic(self.display, line, col, code, message, severity)  # type: ignore[arg-type]


class LoadError(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.format())
        self.diagnostic = diagnostic


def load_file(
    path: Path, display: str | None = None, *, bounds: Bounds | None = None, pipes: bool = False
) -> Document:
    """Read and parse one YAML file; raises LoadError with a single clear diagnostic.

    With `bounds`, a file that resolves outside the yard is refused unopened (engine/definitions/files.py);
    only regular files are read (and pipes, with `pipes`), never more than MAX_FILE_BYTES,
    whatever size they claim.
    """
    shown = display or str(path)
    try:
        raw = read_bytes(path, MAX_FILE_BYTES, bounds, shown, pipes=pipes)
    except Refused as exc:
        raise LoadError(Diagnostic(shown, 1, 1, exc.code, exc.message)) from None
    except TooLarge as exc:
        size = (
            f"{exc.size / 1e6:.1f} MB"
            if exc.size is not None
            else f"more than {MAX_FILE_BYTES // 1024} KiB"
        )
        limit = f"definitions are limited to {MAX_FILE_BYTES // 1024} KiB"
        raise LoadError(Diagnostic(shown, 1, 1, "BY001", f"file is {size}; {limit}")) from None
    except OSError as exc:
        raise LoadError(
            Diagnostic(shown, 1, 1, "BY001", f"cannot read file: {exc.strerror}")
        ) from None
    return load_bytes(raw, shown, path)


def load_bytes(raw: bytes, display: str, path: Path | None = None) -> Document:
    if len(raw) > MAX_FILE_BYTES:
        raise LoadError(
            Diagnostic(
                display,
                1,
                1,
                "BY001",
                f"file is {len(raw) / 1e6:.1f} MB; definitions are limited to "
                f"{MAX_FILE_BYTES // 1024} KiB",
            )
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise LoadError(
            Diagnostic(display, line, col, "BY001", "not a UTF-8 text file (binary data?)")
        ) from None
    if "\x00" in text:
        offset = text.index("\x00")
        line = text.count("\n", 0, offset) + 1
        raise LoadError(
            Diagnostic(display, line, 1, "BY001", "not a text file (contains NUL bytes)")
        )
    return _Composer(text, display, path or Path(display)).document()


class _Composer:
    def __init__(self, text: str, display: str, path: Path, *, prefix: bool = False) -> None:
        self.text = text
        self.display = display
        self.doc = Document(path, display, None)
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.count = 0
        self.prefix = prefix  # composing the start of a document again, for too_deep()

    def fail(self, mark: Any, code: str, message: str) -> LoadError:
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return LoadError(Diagnostic(self.display, line, col, code, message))

    def document(self) -> Document:
        try:
            events = iter(yaml.parse(self.text, Loader=_Loader))
            self.events = events
            next(events)  # StreamStart
            first = next(events)
            if isinstance(first, yaml.StreamEndEvent):
                raise self.fail(None, "BY006", "file is empty; expected a mapping")
            self.doc.data, _ = self.node(next(events), (), 0)
            next(events)  # DocumentEnd
            extra = next(events)
            if not isinstance(extra, yaml.StreamEndEvent):
                raise self.fail(
                    extra.start_mark,
                    "BY007",
                    "more than one YAML document in the file; put one definition per file",
                )
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            problem = exc.problem or exc.context or "invalid YAML"
            if _NESTING_CAP.search(problem):
                raise self.too_deep(mark) from None
            raise self.fail(mark, "BY002", f"YAML syntax error: {problem}") from None
        except yaml.reader.ReaderError as exc:
            # raised for control characters, with an offset into the text instead of a mark
            char = exc.character if isinstance(exc.character, int) else ord(exc.character)
            line = self.text.count("\n", 0, exc.position) + 1
            col = exc.position - (self.text.rfind("\n", 0, exc.position) + 1) + 1
            raise LoadError(
                Diagnostic(
                    self.display,
                    line,
                    col,
                    "BY002",
                    f"YAML syntax error: control character #x{char:04x} is not allowed",
                )
            ) from None
        except yaml.YAMLError as exc:
            raise self.fail(None, "BY002", f"YAML syntax error: {exc}") from None
        if self.doc.data is None:
            raise LoadError(
                Diagnostic(self.display, 1, 1, "BY006", "file is empty; expected a mapping")
            )
        return self.doc

    def too_deep(self, mark: Any) -> LoadError:
        """The diagnostic for a document the parser gave up on for its own nesting cap (libyaml 0.2.6,
        bundled from PyYAML 6.0.4 on, refuses more than 1000 levels).

        That cap can trip while the events seen here are still shallow: to tell whether a `[` or `{`
        starts an implicit key (`[a, b]: c`), the scanner reads up to 1024 characters of the line ahead
        of the parser, so a line of 1000 brackets reaches the cap before the parser has reported the
        65th. Everything before the point where the scanner gave up is scanned like any other text, so
        that part is composed again: our own check then fires at the collection that first goes deeper
        than MAX_DEPTH, as it does with a parser without a cap (or an earlier problem is reported, as
        it would be there). Failing that, BY005 is reported where the parser stopped.
        """
        end = getattr(mark, "index", None)
        if not self.prefix and isinstance(end, int) and 0 < end < len(self.text):
            stop = (mark.line + 1, mark.column + 1)
            try:
                _Composer(self.text[:end], self.display, self.doc.path, prefix=True).document()
            except LoadError as exc:
                found = exc.diagnostic
                # at the cut itself, it is the cut that the parser objects to, not the document
                if found.code == "BY005" or (found.line, found.col) < stop:
                    return exc
        return self.fail(mark, "BY005", f"nesting deeper than {MAX_DEPTH} levels")

    def node(self, event: Any, path: JsonPath, depth: int) -> tuple[Any, int]:
        """Build the value that starts with `event`; returns it and how many values it holds."""
        if depth > MAX_DEPTH:
            raise self.fail(event.start_mark, "BY005", f"nesting deeper than {MAX_DEPTH} levels")
        mark = event.start_mark
        self.doc.marks.setdefault(path, (mark.line + 1, mark.column + 1))
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in self.anchors:
                raise self.fail(
                    mark, "BY002", f"YAML syntax error: unknown or recursive alias *{event.anchor}"
                )
            value, size = self.anchors[event.anchor]
            self.spend(size, mark)
            return value, size
        tag = getattr(event, "tag", None)
        if isinstance(event, yaml.ScalarEvent):
            self.spend(1, mark)
            value = self.scalar(event)
            size = 1
        elif isinstance(event, yaml.SequenceStartEvent):
            self.check_tag(tag, "seq", mark)
            value, size = self.sequence(path, depth)
        elif isinstance(event, yaml.MappingStartEvent):
            self.check_tag(tag, "map", mark)
            value, size = self.mapping(path, depth)
        else:  # pragma: no cover - libyaml emits nothing else here
            raise self.fail(mark, "BY002", "YAML syntax error: unexpected content")
        if event.anchor:
            self.anchors[event.anchor] = (value, size)
        return value, size

    def spend(self, size: int, mark: Any) -> None:
        self.count += size
        if self.count > MAX_VALUES:
            raise self.fail(
                mark, "BY005", f"document expands to more than {MAX_VALUES} values (alias bomb?)"
            )

    def sequence(self, path: JsonPath, depth: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        size = 1
        for event in self.events:
            if isinstance(event, yaml.SequenceEndEvent):
                return items, size
            value, n = self.node(event, (*path, len(items)), depth + 1)
            items.append(value)
            size += n
        # pragma: no cover
        raise self.fail(None, "BY002", "YAML syntax error: unterminated sequence")

    def mapping(self, path: JsonPath, depth: int) -> tuple[JsonDict, int]:
        result: JsonDict = {}
        size = 1
        for event in self.events:
            if isinstance(event, yaml.MappingEndEvent):
                return result, size
            if not isinstance(event, yaml.ScalarEvent):
                raise self.fail(
                    event.start_mark,
                    "BY002",
                    "YAML syntax error: mapping keys must be plain scalars",
                )
            key_value = self.scalar(event, key=True)
            key = key_value if isinstance(key_value, str) else _plain_text(key_value, event.value)
            start = event.start_mark  # the parser marks every event; the stubs allow None
            mark = (start.line + 1, start.column + 1) if start is not None else (1, 1)
            if key == "<<" and event.implicit[0]:
                raise self.fail(
                    event.start_mark,
                    "BY002",
                    "merge keys ('<<') are YAML 1.1 only; write the keys out",
                )
            if key in result:
                first = self.doc.key_marks.get((*path, key), mark)
                raise self.fail(
                    event.start_mark,
                    "BY004",
                    f"duplicate key '{key}' (first defined at line {first[0]})",
                )
            self.doc.key_marks[(*path, key)] = mark
            value, n = self.node(next(self.events), (*path, key), depth + 1)
            result[key] = value
            size += n
        # pragma: no cover
        raise self.fail(None, "BY002", "YAML syntax error: unterminated mapping")

    def check_tag(self, tag: str | None, kind: str, mark: Any) -> None:
        if tag not in (None, "!", _CORE + kind):
            raise self.fail(
                mark, "BY003", f"tag '{tag}' is not allowed; Blockyard reads plain YAML only"
            )

    def scalar(self, event: Any, *, key: bool = False) -> Any:
        try:
            return self._scalar(event)
        except _IntOutOfRange:
            if key:
                return event.value  # a mapping key is text anyway
            raise self.fail(
                event.start_mark,
                "BY107",
                f"integer {_abridged(event.value)} is outside the 64-bit range ({INT_RANGE}); "
                "quote it to make it text",
            ) from None

    def _scalar(self, event: Any) -> Any:
        tag, value = event.tag, event.value
        if tag in (None, "!") and event.implicit[0]:
            return _resolve_core(value)
        if tag in (None, "!", _CORE + "str"):
            return value
        if tag in (_CORE + "int", _CORE + "float", _CORE + "bool", _CORE + "null"):
            try:
                resolved = _resolve_core(value)
            except _IntOutOfRange:
                if not tag.endswith("float"):
                    raise
                resolved = float(value)
            expected: Any = {"int": int, "float": (int, float), "bool": bool, "null": type(None)}[
                tag[len(_CORE) :]
            ]
            if not isinstance(resolved, expected) or (
                tag.endswith("int") and isinstance(resolved, bool)
            ):
                raise self.fail(
                    event.start_mark, "BY002", f"'{value}' is not a valid {tag[len(_CORE) :]}"
                )
            return float(resolved) if tag.endswith("float") else resolved
        raise self.fail(
            event.start_mark,
            "BY003",
            f"tag '{tag}' is not allowed; Blockyard reads plain YAML only",
        )


class _IntOutOfRange(ValueError):
    """An integer literal beyond the engine's 64-bit integers (engine/core/values.py)."""


def _resolve_core(text: str) -> Any:
    """YAML 1.2 core schema resolution of a plain scalar; _IntOutOfRange for an integer beyond 64 bits."""
    if text and text[0] not in _NOT_TEXT_START:
        return text
    if text in _NULLS:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT.fullmatch(text):
        # checked before int(): Python refuses to convert more than 4300 decimal digits (ValueError)
        if len(text.lstrip("+-").lstrip("0")) > 19:
            raise _IntOutOfRange(text)
        return _in_range(int(text), text)
    if _OCT.fullmatch(text):
        return _in_range(int(text[2:], 8), text)
    if _HEX.fullmatch(text):
        return _in_range(int(text[2:], 16), text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if _INF.fullmatch(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN.fullmatch(text):
        return math.nan
    return text


def _in_range(value: int, text: str) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise _IntOutOfRange(text)
    return value


def _abridged(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else f"{text[:12]}...{text[-6:]} ({len(text)} characters)"


def _plain_text(value: Any, source: str) -> str:
    # JSON-shaped data: a key such as `1` or `null` is the text the author wrote
    return source


def parse_value(text: str) -> Any:
    """A command-line value as YAML 1.2 (`7` is a number, `[1,2]` a list, anything else a string).
    ValueDomainError for what no value may hold: an integer beyond 64 bits, a lone surrogate."""
    problem = text_problem(text)
    if problem is not None:
        raise ValueDomainError(f"the value {problem}")
    try:
        doc = load_bytes(text.encode("utf-8"), "<value>")
    except LoadError as exc:
        if exc.diagnostic.code == "BY107":
            # an integer beyond 64 bits: refused, not quietly made text
            raise ValueDomainError(exc.diagnostic.message) from None
        if exc.diagnostic.code == "BY006":
            return text if text else ""
        return text
    return doc.data
