"""The pieces of `blockyard stats` and `GET /stats` that need no database: the window, percentiles, the
cost texts that never take an unknown price for zero, the table, the JSON of usage totals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.cli.runs import compact
from engine.cli.stats import render
from engine.core.errors import UsageError
from engine.core.usage import Spend
from engine.state import stats
from engine.state.stats import Report, Row, Window

NOW = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def test_the_window_is_a_duration_back_or_a_date() -> None:
    assert stats.window(None, NOW) == Window("2026-11-21T12:00:00.000Z", "7d")
    assert stats.window("90m", NOW).since == "2026-11-28T10:30:00.000Z"
    assert stats.window("2026-11-01", NOW) == Window("2026-11-01T00:00:00.000Z", "2026-11-01")
    assert stats.window("2026-11-01T10:00+02:00", NOW).since == "2026-11-01T08:00:00.000Z"
    assert stats.window("2026-11-01 09:30:15Z", NOW).since == "2026-11-01T09:30:15.000Z"
    for bad, message in (
        ("last week", "not a duration such as 7d"),
        ("2026-13-01", "not a date"),
        ("99999d", "longer than ten years"),
        ("-1d", "not a duration"),
    ):
        with pytest.raises(UsageError, match=message):
            stats.window(bad, NOW)


def test_percentiles_are_durations_runs_really_took() -> None:
    assert stats.percentile([], 0.5) is None
    assert stats.percentile([3.0], 0.95) == 3.0
    values = [float(n) for n in range(1, 21)]
    assert (stats.percentile(values, 0.5), stats.percentile(values, 0.95)) == (10.0, 19.0)
    assert stats.percentile([1.0, 2.0], 0.5) == 1.0 and stats.percentile([1.0, 2.0], 0.95) == 2.0


def _row(
    version: int, *, priced: int = 0, unpriced: int = 0, ended: int = 1, failed: int = 0
) -> Row:
    spend = Spend()
    for _ in range(priced):
        spend.add({"input_tokens": 100, "output_tokens": 50, "cost_usd": 0.01})
    for _ in range(unpriced):
        spend.add({"input_tokens": 10, "output_tokens": 5, "cost_usd": None})
    unpriced_runs = 1 if unpriced else 0
    return Row(
        "f",
        version,
        runs=ended,
        finished=ended - failed,
        failed=failed,
        spend=spend,
        unpriced_runs=unpriced_runs,
        ended_tokens=spend.tokens,
        ended_cost=spend.cost_usd,
        ended_unpriced=unpriced_runs,
        ended_unknown=1 if unpriced and not priced else 0,
        durations=[1.0] * ended,
    )


def test_a_cost_says_when_a_price_is_unknown_and_never_shows_it_as_zero() -> None:
    assert (_row(1).cost_text(), _row(1).mean_cost_text()) == ("-", "-")
    assert _row(1, ended=0).mean_cost_text() == "-"
    known = _row(1, priced=2, ended=2)
    assert (known.cost_text(), known.mean_cost_text(), known.mean_cost_usd) == (
        "$0.0200",
        "$0.0100",
        0.01,
    )
    unknown = _row(1, unpriced=1)
    assert (unknown.cost_text(), unknown.mean_cost_text(), unknown.mean_cost_usd) == (
        "unknown",
        "unknown",
        None,
    )
    assert unknown.as_dict()["cost_usd"] is None
    partial = _row(1, priced=1, unpriced=1)
    assert (
        partial.cost_text() == ">= $0.0100 (1 run unpriced)"
        and partial.mean_cost_text() == ">= $0.0100"
    )
    partial.merge(_row(1, priced=0, unpriced=2))
    assert partial.cost_text() == ">= $0.0100 (2 runs unpriced)"


def test_the_table_has_a_row_per_version_and_one_per_flow_of_several() -> None:
    report = Report(
        Window("2026-11-21T12:00:00.000Z", "7d"),
        None,
        [
            _row(1, priced=1),
            _row(2, priced=3, ended=2, failed=1),
            Row("g", 1, runs=1, finished=1, durations=[0.5]),
        ],
    )
    lines = render(report).splitlines()
    assert lines[0].startswith("runs since ") and lines[0].endswith("(7d)")
    assert [line.split()[:3] for line in lines[2:]] == [
        ["f", "1", "1"],
        ["f", "2", "2"],
        ["f", "all", "3"],
        ["g", "1", "1"],
    ]
    assert lines[3].split()[3:5] == ["1", "(50%)"]
    assert lines[4].split()[-1] == "$0.0400"  # f over its versions
    assert lines[5].split()[-2:] == ["-", "-"]  # g made no model call: nothing to price
    whole = {row["flow"]: row for row in report.as_dict()["flows"]}
    assert (
        whole["f"]["runs"] == 3
        and whole["f"]["version"] is None
        and whole["f"]["duration_p50_s"] == 1.0
    )
    assert render(Report(Window("2026-11-21T12:00:00.000Z", "7d"), "f", [])).endswith(
        "no runs in this window\n"
    )


def test_usage_json_and_compact_counts() -> None:
    spend = Spend()
    spend.add({"input_tokens": 1200, "output_tokens": 34, "cost_usd": None})
    shown = stats.usage_dict(spend)
    assert shown == {
        "model_calls": 1,
        "input_tokens": 1200,
        "output_tokens": 34,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
        "cost_usd": None,
        "unpriced_calls": 1,
        "tokens": 1234,
        "cost": "unknown",
    }
    assert stats.usage_dict({}) == {**Spend().as_dict(), "tokens": 0, "cost": "-"}
    assert [compact(n) for n in (0, 950, 1000, 12345, 4_100_000, 2_000_000_000)] == [
        "0",
        "950",
        "1k",
        "12.3k",
        "4.1M",
        "2B",
    ]
