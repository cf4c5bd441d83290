"""engine/telemetry/wire.py writes OTLP protobuf by hand (the SDK's encoder costs ~7x as much per span):
what it writes is read back here with the official protobuf classes, field by field."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from engine.telemetry import wire
from tests.support.otlp_sink import decode

RESOURCE = wire.resource({"service.name": "blockyard", "openinference.project.name": "tests"})
SCOPE = wire.scope("blockyard", "9.9.9")
TRACE = (0x0AF7651916CD43DD8448EB211C80319C).to_bytes(16, "big")
REMOTE_PARENT = (0xB7AD6B7169203331).to_bytes(8, "big")
ROOT = (0x00F067AA0BA902B7).to_bytes(8, "big")
CHILD = (0x1111111111111111).to_bytes(8, "big")


def _spans() -> list[bytes]:
    root_head = wire.head(
        "invoke_workflow hello", wire.INTERNAL, {"blockyard.run_id": "r1", "unicode": "grüße ✓"}
    )
    varying = wire.attributes(
        9,
        {
            "blockyard.flow.version": 3,
            "blockyard.run.resumed": True,
            "blockyard.usage.cost_usd": 0.0125,
            "negative": -7,
            "big": 2**62,
            "large": 300,
            "tags": ("a", "b"),
            "numbers": (1, 2),
        },
    )
    rest = (
        varying
        + wire.event(
            1_700_000_000_000_000_123, "approval_decided", {"blockyard.decision": "approve"}
        )
        + wire.link(
            (0x1234).to_bytes(16, "big"),
            (0x5678).to_bytes(8, "big"),
            {"blockyard.link": "previous_execution"},
        )
        + wire.status(wire.ERROR, "step 'greet' failed")
    )
    return [
        wire.span(
            TRACE,
            ROOT,
            REMOTE_PARENT,
            root_head,
            1_700_000_000_000_000_000,
            1_700_000_000_500_000_000,
            rest,
            wire.REMOTE,
        ),
        wire.span(
            TRACE,
            CHILD,
            ROOT,
            wire.head("chat gpt-4o-mini", wire.CLIENT, {}),
            1_700_000_000_100_000_000,
            1_700_000_000_200_000_000,
            wire.attributes(9, {"gen_ai.usage.input_tokens": 12}),
        ),
        wire.span(
            TRACE,
            (0x22).to_bytes(8, "big"),
            None,
            wire.head("step orphan", wire.INTERNAL, {}),
            5,
            5,
        ),
    ]


def test_every_field_reads_back() -> None:
    body = wire.request(RESOURCE, SCOPE, _spans())
    root, chat, orphan = decode(body)
    assert root.name == "invoke_workflow hello"
    assert (root.trace_id, root.span_id, root.parent_id) == (
        TRACE.hex(),
        "00f067aa0ba902b7",
        "b7ad6b7169203331",
    )
    assert root.kind == 1 and chat.kind == 3  # OTLP's INTERNAL and CLIENT
    assert (root.start, root.end) == (1_700_000_000_000_000_000, 1_700_000_000_500_000_000)
    assert root.attributes == {
        "blockyard.run_id": "r1",
        "unicode": "grüße ✓",
        "blockyard.flow.version": 3,
        "blockyard.run.resumed": True,
        "blockyard.usage.cost_usd": 0.0125,
        "negative": -7,
        "big": 2**62,
        "large": 300,
        "tags": ["a", "b"],
        "numbers": [1, 2],
    }
    assert (root.status, root.status_message) == (2, "step 'greet' failed")
    # whether the parent is remote is known, it is, sampled
    assert root.flags == 0x100 | 0x200 | 0x01
    assert root.events == [("approval_decided", {"blockyard.decision": "approve"})]
    assert root.links == [
        (f"{0x1234:032x}", f"{0x5678:016x}", {"blockyard.link": "previous_execution"})
    ]
    assert root.resource == {"service.name": "blockyard", "openinference.project.name": "tests"}
    assert root.scope == ("blockyard", "9.9.9")
    assert chat.parent_id == "00f067aa0ba902b7" and chat.flags == 0x101 and chat.status == 0
    assert chat.attributes == {"gen_ai.usage.input_tokens": 12}
    assert orphan.parent_id is None and orphan.attributes == {} and orphan.flags == 0x101


def test_the_link_says_its_span_is_sampled_and_local() -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(wire.request(RESOURCE, SCOPE, _spans()[:1]))
    (link,) = request.resource_spans[0].scope_spans[0].spans[0].links
    assert link.flags == 0x101


def test_a_batch_is_one_resource_and_one_scope() -> None:
    request = ExportTraceServiceRequest()
    request.ParseFromString(wire.request(RESOURCE, SCOPE, _spans() * 3))
    assert len(request.resource_spans) == 1
    assert len(request.resource_spans[0].scope_spans) == 1
    assert len(request.resource_spans[0].scope_spans[0].spans) == 9


def test_values_keep_their_types() -> None:
    """True and 1 are equal in Python, 1 and 1.0 too: the short paths for numbers must keep them apart."""
    values = {"x": True, "y": 1, "z": 1.0, "w": 0, "v": 127, "u": 128, "t": -1, "s": 2**63 - 1}
    (span,) = decode(
        wire.request(
            RESOURCE,
            SCOPE,
            [
                wire.span(
                    TRACE,
                    CHILD,
                    None,
                    wire.head("a", wire.INTERNAL, {}),
                    1,
                    2,
                    wire.attributes(9, values),
                )
            ],
        )
    )
    assert span.attributes == values
    assert [type(value) for value in span.attributes.values()] == [
        bool,
        int,
        float,
        int,
        int,
        int,
        int,
        int,
    ]


def test_an_empty_batch_is_an_empty_request() -> None:
    assert wire.request(RESOURCE, SCOPE, []) == b""
    assert decode(b"") == []
