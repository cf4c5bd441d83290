"""The metrics observer alone (engine/serve/metrics.py): events made by hand, told to it as the runtime
tells its observers, and the exposition read back with the client library's parser. End to end, on a
real server: tests/serve/test_serve_usage.py."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from engine.core.events import RunStatus, Sequencer
from engine.serve.metrics import OTHER, Metrics
from engine.state.store import RunRecord

NO_EXECUTION = None  # the metrics never look at the execution


def _run(flow: str = "f", version: int = 1) -> RunRecord:
    return RunRecord(
        id=f"{flow}-run",
        flow=flow,
        version=version,
        digest="d",
        status=RunStatus.RUNNING,
        inputs={},
    )


def _values(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
    }


def _sum(
    values: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return sum(
        value
        for (sample, have), value in values.items()
        if sample == name and set(labels.items()) <= have
    )


def _call(**data: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "model": "gpt",
        "purpose": "block",
        "input_tokens": 100,
        "output_tokens": 20,
        "cached_tokens": None,
        "reasoning_tokens": 5,
        "latency_ms": 1500.0,
        "cost_usd": 0.25,
        "ok": True,
        **data,
    }


def test_every_event_kind_lands_in_its_metric() -> None:
    metrics = Metrics()
    run = _run()
    seq = Sequencer(run.id)
    for event in (
        seq.make("run_started", None, {"flow": "f"}),
        seq.make("step_started", "a"),
        seq.make("token", "a", {"text": "x"}),
        seq.make("model_call", "a", _call()),
        seq.make(
            "model_call", "a", _call(cost_usd=None, input_tokens=None, ok=False, error="boom")
        ),
        seq.make("step_finished", "a", {"duration_ms": 250}),
        seq.make("step_failed", "b", {"duration_ms": 40, "error": "x"}),
        seq.make("run_failed", "b", {"status": RunStatus.FAILED, "error": "x"}),
        seq.make("run_started", None, {"resumed": True}),
        seq.make("run_failed", None, {"status": RunStatus.INTERRUPTED}),
        seq.make("run_started", None, {"resumed": True}),
        seq.make("run_finished", None, {"duration_ms": 2000.0}),
    ):
        metrics.observe(run, event, NO_EXECUTION)
    metrics.took_over("running")
    metrics.snapshot(queued=3, running=2, waiting={"f": 1, "g": 4})
    values = _values(metrics)
    flow = {"flow": "f", "version": "1"}
    assert _sum(values, "blockyard_runs_started_total", **flow) == 1
    assert _sum(values, "blockyard_runs_resumed_total", **flow) == 2
    assert _sum(values, "blockyard_runs_failed_total", **flow) == 1
    assert _sum(values, "blockyard_runs_interrupted_total", **flow) == 1
    assert _sum(values, "blockyard_runs_finished_total", **flow) == 1
    assert _sum(values, "blockyard_run_duration_seconds_sum", **flow) == 2.0
    assert _sum(values, "blockyard_step_duration_seconds_count", flow="f", step="a") == 1
    assert _sum(values, "blockyard_step_duration_seconds_sum", flow="f", step="b") == 0.04
    model = {"flow": "f", "provider": "openai", "model": "gpt"}
    assert _sum(values, "blockyard_model_calls_total", outcome="ok", **model) == 1
    assert _sum(values, "blockyard_model_calls_total", outcome="error", **model) == 1
    assert _sum(values, "blockyard_model_call_duration_seconds_sum", **model) == 3.0
    # tokens a provider did not report are not counted as 0 tokens of a kind: they are not counted
    assert {
        kind: _sum(values, "blockyard_model_tokens_total", kind=kind, **model)
        for kind in ("input", "output", "cached", "reasoning")
    } == {"input": 100, "output": 40, "cached": 0, "reasoning": 10}
    assert _sum(values, "blockyard_model_cost_usd_total", **model) == 0.25
    assert _sum(values, "blockyard_model_calls_unpriced_total", **model) == 1
    assert _sum(values, "blockyard_runs_taken_over_total", kind="running") == 1
    assert (_sum(values, "blockyard_queue_depth"), _sum(values, "blockyard_runs_running")) == (3, 2)
    assert (
        _sum(values, "blockyard_runs_waiting", flow="f"),
        _sum(values, "blockyard_runs_waiting"),
    ) == (1, 5)
    metrics.snapshot(queued=0, running=0, waiting={})
    # no flow waits any more: no stale series
    assert _sum(_values(metrics), "blockyard_runs_waiting") == 0


def test_label_values_are_bounded() -> None:
    metrics = Metrics()
    metrics._flows.limit = 2  # as if MAX_FLOWS flows had been seen
    for flow in ("a", "b", "plan-1", "plan-2"):
        run = _run(flow)
        seq = Sequencer(run.id)
        metrics.observe(run, seq.make("run_started"), NO_EXECUTION)
        metrics.observe(run, seq.make("step_finished", "s", {"duration_ms": 1}), NO_EXECUTION)
    values = _values(metrics)
    assert _sum(values, "blockyard_runs_started_total", flow="a") == 1
    assert _sum(values, "blockyard_runs_started_total", flow=OTHER, version=OTHER) == 2
    assert _sum(values, "blockyard_step_duration_seconds_count", flow=OTHER, step=OTHER) == 2
    assert not any(dict(labels).get("flow", "").startswith("plan") for _name, labels in values)


def test_two_servers_count_apart() -> None:
    one, two = Metrics(), Metrics()
    run = _run()
    one.observe(run, Sequencer(run.id).make("run_started"), NO_EXECUTION)
    assert _sum(_values(one), "blockyard_runs_started_total") == 1
    assert _sum(_values(two), "blockyard_runs_started_total") == 0
