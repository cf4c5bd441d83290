"""Spans as an OTLP/HTTP request body: the protobuf `ExportTraceServiceRequest` of
opentelemetry-proto (trace/v1/trace.proto), written field by field.

A span is encoded once, as it ends (engine/telemetry/spans.py), into the bytes of one `Span` field
of a `ScopeSpans`; a batch's body is those bytes between the pipeline's resource and scope, encoded
once per pipeline (`request`). What is the same for every run of a flow — a span's name, its kind
and its fixed attributes (a step's label, block and kind; a model call's model and provider) — is
encoded once per flow definition as a `head` and kept by the caller; only the values that vary (ids,
times, token counts, a status) are written per span, numbers through a short path (`pairs`).

Why not the SDK's encoder: it builds a protobuf message object per span, attribute and value, about
70 µs a span on a small machine — more than a durable 50-step run spends on each step. Why bytes and
not objects: a span kept as bytes until its batch leaves is nothing the cyclic garbage collector
scans or counts, where an SDK span (a dozen objects) waiting in a queue is promoted through its
generations and sets off collections of its own (docs/performance.md, "OpenTelemetry traces").
tests/telemetry/test_wire.py decodes what this writes with the official protobuf classes. Only the
standard library.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_TIMES = struct.Struct("<BQBQ").pack  # a span's start (field 7) and end (8), fixed64 each
_CACHE_LIMIT = 8192  # attribute keys whose encoded field is kept: a yard's keys are a few dozen

# Span.kind: OTLP's numbers
INTERNAL = 1
CLIENT = 3
# Status.code
ERROR = 2
# Span.flags: bit 8 says whether the parent is remote is known, bit 9 that it is (OTLP 1.x); bit 0 sampled
HAS_IS_REMOTE = 0x100
IS_REMOTE = 0x200
SAMPLED = 0x01

_ONE_BYTE = [bytes((value,)) for value in range(128)]


def varint(value: int) -> bytes:
    if 0 <= value < 128:
        return _ONE_BYTE[value]
    value &= 0xFFFFFFFFFFFFFFFF  # int64 fields: two's complement, as protobuf writes them
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): a string, bytes, or an embedded message."""
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def text(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def any_value(value: Any) -> bytes:
    """An AnyValue: string 1, bool 2, int 3, double 4, array 5, bytes 7."""
    if isinstance(value, str):
        return field(1, text(value))
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + varint(value)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, bytes):
        return field(7, value)
    if isinstance(value, Sequence):
        return field(5, b"".join(field(1, any_value(item)) for item in value))
    return field(1, text(str(value)))


_keys: dict[str, bytes] = {}  # an attribute's key as its encoded field (KeyValue.key)


def _key(key: str) -> bytes:
    found = _keys.get(key)
    if found is None:
        found = field(1, key.encode("utf-8"))
        if len(_keys) < _CACHE_LIMIT:
            _keys[key] = found
    return found


def pair(tag: int, key: str, value: Any) -> bytes:
    """One KeyValue as field `tag` of its message (a span's attributes are 9, an event's 3, a link's 4,
    a resource's 1)."""
    kind = type(value)
    body: bytes
    if kind is str:
        encoded = value.encode("utf-8", "surrogatepass")
        size = len(encoded)
        if size < 126:  # AnyValue{string_value} and its frame: two one-byte lengths
            body = _key(key) + bytes((0x12, size + 2, 0x0A, size)) + encoded
        else:
            body = _key(key) + field(2, field(1, encoded))
    elif (kind is int or kind is float) and tag == 9:
        return number(key, value)
    else:
        body = _key(key) + field(2, any_value(value))
    size = len(body)
    if size < 128 and tag < 16:  # one byte each for the tag and the length
        return bytes((tag << 3 | 2, size)) + body
    return varint(tag << 3 | 2) + varint(size) + body


def _number_prefixes(key: str) -> tuple[bytes, bytes, bytes, bytes]:
    """What comes before the value in a span attribute (field 9) `key` whose value is an int of one, two or
    three varint bytes, or a double."""
    name = _key(key)
    return (
        b"\x4a" + varint(len(name) + 4) + name + b"\x12\x02\x18",  # AnyValue{int_value}, one byte
        b"\x4a" + varint(len(name) + 5) + name + b"\x12\x03\x18",
        b"\x4a" + varint(len(name) + 6) + name + b"\x12\x04\x18",
        b"\x4a" + varint(len(name) + 11) + name + b"\x12\x09\x21",
    )  # AnyValue{double_value}


_numbers: dict[str, tuple[bytes, bytes, bytes, bytes]] = {}  # key -> _number_prefixes(key)


def number(key: str, value: Any) -> bytes:
    """A span's attribute (field 9) whose value is a number: a token count, a cost, a time. What comes
    before the value is kept per key: a count under 2**21 or a double is a concatenation or two."""
    prefixes = _numbers.get(key)
    if prefixes is None:
        prefixes = _number_prefixes(key)
        if len(_numbers) < _CACHE_LIMIT:
            _numbers[key] = prefixes
    return _number(key, prefixes, value)


def _number(key: str, prefixes: tuple[bytes, bytes, bytes, bytes], value: Any) -> bytes:
    kind = type(value)
    encoded: bytes
    if kind is int and 0 <= value < 0x200000:
        if value < 0x80:
            encoded = prefixes[0] + _ONE_BYTE[value]
        elif value < 0x4000:
            encoded = prefixes[1] + bytes((value & 0x7F | 0x80, value >> 7))
        else:
            encoded = prefixes[2] + bytes(
                (value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14)
            )
        return encoded
    if kind is float:
        encoded = prefixes[3] + _DOUBLE(value)
        return encoded
    body = _key(key) + field(2, any_value(value))
    return b"\x4a" + varint(len(body)) + body


class Numbers:
    """The span attributes (field 9) of a fixed set of numbers read from a mapping: `fields` are (what the
    mapping calls it, the attribute's key). Each is written when it is an int or a float (never a bool:
    a model call's token counts, its cost), its key's bytes made once."""

    def __init__(self, fields: Iterable[tuple[str, str]]) -> None:
        self.fields = tuple((source, key, _number_prefixes(key)) for source, key in fields)

    def __call__(self, values: Mapping[str, Any]) -> bytes:
        found = []
        for source, key, prefixes in self.fields:
            value: Any = values.get(source)
            kind = type(value)
            if kind is int and 0 <= value < 0x80:
                # most counts of a model call: its cached, reasoning tokens
                found.append(prefixes[0] + _ONE_BYTE[value])
            elif kind is float:
                found.append(prefixes[3] + _DOUBLE(value))
            elif kind is int:
                found.append(_number(key, prefixes, value))
        return b"".join(found)


def attributes(tag: int, values: Mapping[str, Any] | None) -> bytes:
    """The repeated KeyValue field `tag` of a message."""
    if not values:
        return b""
    return b"".join([pair(tag, key, value) for key, value in values.items()])


def head(name: str, kind: int, values: Mapping[str, Any]) -> bytes:
    """What a span says that is the same for every run of a flow: its name (Span field 5), its kind (6)
    and its fixed attributes (9). Encoded once per flow definition and kept (engine/telemetry/spans.py)."""
    return field(5, text(name)) + b"\x30" + varint(kind) + attributes(9, values)


def event(at: int, name: str, values: Mapping[str, Any]) -> bytes:
    """A Span.Event (field 11): time 1, name 2, attributes 3."""
    return field(11, b"\x09" + _FIXED64(at) + field(2, text(name)) + attributes(3, values))


def link(trace_id: bytes, span_id: bytes, values: Mapping[str, Any]) -> bytes:
    """A Span.Link (field 13) to a sampled span of this process: trace id 1, span id 2, attributes 4, flags 6."""
    return field(
        13,
        field(1, trace_id)
        + field(2, span_id)
        + attributes(4, values)
        + b"\x35"
        + _FIXED32(HAS_IS_REMOTE | SAMPLED),
    )


def status(code: int, message: str | None) -> bytes:
    """A Status (field 15): message 2, code 3."""
    return field(15, (field(2, text(message)) if message else b"") + b"\x18" + varint(code))


def flags(remote_parent: bool) -> bytes:
    """Span.flags (field 16, fixed32) of a sampled span."""
    return b"\x85\x01" + _FIXED32(HAS_IS_REMOTE | SAMPLED | (IS_REMOTE if remote_parent else 0))


LOCAL = flags(False)
REMOTE = flags(True)


_trace: tuple[bytes, bytes] = (
    b"",
    b"",
)  # the last trace id and its fields (1, and 2's tag): a trace's spans share it
_parent: tuple[bytes, bytes] = (
    b"",
    b"",
)  # the last parent span id and its field (4): a flow's steps share the root
_frames: dict[
    int, bytes
] = {}  # a Span's size -> the field's tag and length before it (sizes repeat: a flow's spans)


def span(
    trace_id: bytes,
    span_id: bytes,
    parent_id: bytes | None,
    head: bytes,
    start: int,
    end: int,
    rest: bytes = b"",
    span_flags: bytes = LOCAL,
) -> bytes:
    """A Span, framed as field 2 of its ScopeSpans: ids 1, 2, 4; `head` (name, kind, fixed attributes);
    times 7, 8; `rest` (more attributes, events, links, status, already encoded); flags 16 (`span_flags`,
    LOCAL or REMOTE). One join: the ids' fields and the frame come from what the spans before left."""
    global _trace, _parent
    ids = _trace  # one read of each pair: threads replace them whole
    if ids[0] is not trace_id:
        ids = _trace = (trace_id, b"\x0a\x10" + trace_id + b"\x12\x08")
    if parent_id is None:
        up = b""
    else:
        above = _parent
        if above[0] is not parent_id:
            above = _parent = (parent_id, b"\x22\x08" + parent_id)
        up = above[1]
    # 52: the ids' fields 20 and 8, the times 18, the flags 6
    size = 52 + len(up) + len(head) + len(rest)
    frame = _frames.get(size)
    if frame is None:
        frame = b"\x12" + varint(size)
        if size < 16384:
            _frames[size] = frame
    return b"".join(
        (frame, ids[1], span_id, up, head, _TIMES(0x39, start, 0x41, end), rest, span_flags)
    )


def resource(values: Mapping[str, Any]) -> bytes:
    """ResourceSpans.resource (field 1): the attributes of the process that sends."""
    return field(1, attributes(1, values))


def scope(name: str, version: str | None) -> bytes:
    """ScopeSpans.scope (field 1): the instrumentation scope, name 1 and version 2."""
    return field(
        1, field(1, name.encode("utf-8")) + (field(2, version.encode("utf-8")) if version else b"")
    )


def request(resource_field: bytes, scope_field: bytes, spans: Iterable[bytes]) -> bytes:
    """An ExportTraceServiceRequest of `spans` (each from `span`), one resource, one scope."""
    joined = b"".join(spans)
    if not joined:
        return b""
    return field(1, resource_field + field(2, scope_field + joined))
