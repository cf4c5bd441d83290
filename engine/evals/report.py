"""The results table `blockyard eval` prints: per eval its cases (pass or fail, score, cost, latency),
why each failed case failed, what its judges said, each assertion's tally, and the eval's totals against
its thresholds; with `--base`, each case's change and the totals' deltas. Colour only on a terminal
without NO_COLOR (the caller says which).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from engine.core.usage import money
from engine.evals.compare import FAIL_TO_PASS, NEW, PASS_TO_FAIL, Comparison
from engine.evals.history import Version
from engine.evals.outcome import Outcome
from engine.evals.results import CaseResult, EvalResult, percent, signed_money

REASONING = 160  # characters of a judge's reasoning in the table (all of it in JSON and Markdown)


class Paint:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour and text else text

    def ok(self, text: str) -> str:
        return self(text, "32")

    def bad(self, text: str) -> str:
        return self(text, "31")

    def dim(self, text: str) -> str:
        return self(text, "2")

    def bold(self, text: str) -> str:
        return self(text, "1")


def render(outcome: Outcome, *, colour: bool = False) -> str:
    paint = Paint(colour)
    lines: list[str] = []
    if outcome.base_label is None:
        for result in outcome.head:
            lines.extend(_eval(result, paint))
    else:
        lines.append(paint.bold(f"base {outcome.base_label} → head {outcome.head_label}"))
        lines.append("")
        for comparison in outcome.comparisons:
            lines.extend(_compared(comparison, outcome.tolerance, paint))
        if outcome.unchanged:
            names = ", ".join(f"{name} ({target})" for name, target in outcome.unchanged)
            lines.append(
                paint.dim(f"not run, unchanged between the revisions: {names} (--all runs them)")
            )
            lines.append("")
    lines.append(_verdict(outcome, paint))
    lines.append(paint.dim(f"{outcome.cache_line()} · {outcome.seconds:.1f} s"))
    return "\n".join(lines) + "\n"


def _eval(result: EvalResult, paint: Paint) -> list[str]:
    lines = [paint.bold(f"eval {result.name}") + paint.dim(f"  {result.target} · {result.file}")]
    if result.problem is not None:
        return [*lines, "  " + paint.bad(f"not run: {result.problem}"), ""]
    rows = [("case", "result", "score", "cost", "latency")]
    rows += [
        (
            case.case,
            "pass" if case.passed else "FAIL",
            f"{case.score:.2f}",
            case.spend.cost_text(),
            ms(case.latency_ms),
        )
        for case in result.cases
    ]
    widths = _widths(rows)
    lines.append(paint.dim("  " + _line(rows[0], widths)))
    for row, case in zip(rows[1:], result.cases, strict=True):
        mark = paint.ok if case.passed else paint.bad
        lines.append("  " + _line(row, widths, {1: mark}))
        lines.extend(_details(case, paint))
    lines.extend(_tallies(result, paint))
    lines.append("  " + _totals(result, paint))
    lines.append("")
    return lines


def _details(case: CaseResult, paint: Paint) -> list[str]:
    found = ["      " + paint.bad(why) for why in case.failures]
    found += [
        "      " + paint.dim(f"{label}: {short(reasoning, REASONING)}")
        for label, reasoning in case.reasons
    ]
    return found


def _tallies(result: EvalResult, paint: Paint) -> list[str]:
    """Each assertion's tally over the cases that ran: `contains 'Ada' 3/4`, a judge's mean score too."""
    tally: dict[str, list[float]] = {}
    passed: dict[str, int] = {}
    for case in result.cases:
        for check in case.checks:
            tally.setdefault(check.label, []).append(check.score)
            passed[check.label] = passed.get(check.label, 0) + int(check.passed)
    if not tally:
        return []
    parts = []
    for label, scores in tally.items():
        text = f"{label} {passed[label]}/{len(scores)}"
        if any(0 < score < 1 for score in scores):
            text += f" (mean {sum(scores) / len(scores):.2f})"
        parts.append(text)
    return ["  " + paint.dim("assertions: " + " · ".join(parts))]


def _totals(result: EvalResult, paint: Paint) -> str:
    text = (
        f"{result.passed_count}/{len(result.cases)} passed ({percent(result.pass_rate)}) · mean score "
        f"{result.mean_score:.2f} · cost {result.spend.cost_text()}"
    )
    if result.judge_spend.model_calls:
        text += f" (judges {result.judge_spend.cost_text()})"
    text += f" · mean latency {ms(result.mean_latency_ms)}"
    misses = result.misses
    return text + " · " + (paint.bad("FAILED: " + "; ".join(misses)) if misses else paint.ok("ok"))


def _compared(comparison: Comparison, tolerance: float, paint: Paint) -> list[str]:
    head, base = comparison.head, comparison.base
    lines = [paint.bold(f"eval {head.name}") + paint.dim(f"  {head.target} · {head.file}")]
    if head.problem is not None:
        return [*lines, "  " + paint.bad(f"not run: {head.problem}"), ""]
    if not comparison.comparable:
        why = base.problem if base is not None and base.problem else "not on the base side"
        lines.append("  " + paint.dim(f"head only: {why}"))
    rows = [("case", "base", "head", "change", "score", "cost", "latency Δ")]
    for change in comparison.cases:
        old = change.base
        rows.append(
            (
                change.case,
                ("pass" if old.passed else "FAIL") if old is not None else "-",
                "pass" if change.head.passed else "FAIL",
                change.change,
                pair(old.score if old else None, change.head.score, "{:.2f}"),
                cost_pair(old, change.head),
                delta_ms(change.latency_delta_ms),
            )
        )
    widths = _widths(rows)
    for number, row in enumerate(rows):
        text = "  " + _line(row, widths)
        if number == 0:
            lines.append(paint.dim(text))
            continue
        change = comparison.cases[number - 1]
        if change.change == PASS_TO_FAIL:
            text = paint.bad(text)
        elif change.change == FAIL_TO_PASS:
            text = paint.ok(text)
        lines.append(text)
        if change.change in (PASS_TO_FAIL, NEW, "fail"):
            lines.extend(_details(change.head, paint))
    before = base if comparison.comparable else None
    summary = (
        f"pass rate {pair(before.pass_rate if before else None, head.pass_rate, None)}"
        f" · mean score {pair(before.mean_score if before else None, head.mean_score, '{:.2f}')}"
        f" · cost {pair_text(before.spend.cost_text() if before else None, head.spend.cost_text())}"
    )
    if comparison.cost_delta is not None:
        summary += f" ({signed_money(comparison.cost_delta)})"
    if comparison.latency_delta_ms is not None:
        summary += f" · mean latency {delta_ms(comparison.latency_delta_ms)}"
    regressions = comparison.regressions(tolerance)
    misses = head.misses
    verdict = "; ".join(
        [*(f"regression: {why}" for why in regressions), *(f"FAILED: {why}" for why in misses)]
    )
    lines.append("  " + summary + " · " + (paint.bad(verdict) if verdict else paint.ok("ok")))
    lines.append("")
    return lines


def _verdict(outcome: Outcome, paint: Paint) -> str:
    total = sum(len(result.cases) for result in outcome.head)
    passed = sum(result.passed_count for result in outcome.head)
    head_spend = outcome.spend(outcome.head)
    text = (
        f"{len(outcome.head)} eval{'s' if len(outcome.head) != 1 else ''}, {passed}/{total} cases passed, "
        f"cost {head_spend.cost_text()}"
    )
    misses, regressions = outcome.misses, outcome.regressions
    if misses:
        return (
            text
            + " · "
            + paint.bad(f"{len(misses)} threshold{'s' if len(misses) != 1 else ''} missed")
        )
    if regressions and outcome.fail_on_regression:
        return (
            text
            + " · "
            + paint.bad(f"{len(regressions)} regression{'s' if len(regressions) != 1 else ''}")
        )
    if regressions:
        return (
            text
            + " · "
            + paint.dim(f"{len(regressions)} regression(s), not failing (no --fail-on regression)")
        )
    return text + " · " + paint.ok("ok")


def pair(old: float | None, new: float, fmt: str | None) -> str:
    show = (lambda value: fmt.format(value)) if fmt is not None else percent
    if old is None:
        return show(new)
    if abs(new - old) < 1e-9:
        return show(new)
    delta = new - old
    sign = "+" if delta > 0 else "-"
    shown = f"{sign}{abs(delta) * 100:.0f} pts" if fmt is None else f"{sign}{abs(delta):.2f}"
    return f"{show(old)} → {show(new)} ({shown})"


def pair_text(old: str | None, new: str) -> str:
    return new if old is None or old == new else f"{old} → {new}"


def cost_pair(old: CaseResult | None, new: CaseResult) -> str:
    if old is None:
        return new.spend.cost_text()
    delta = new.spend.cost_usd - old.spend.cost_usd
    text = pair_text(old.spend.cost_text(), new.spend.cost_text())
    return f"{text} ({signed_money(delta)})" if delta else text


def delta_ms(delta: float | None) -> str:
    if delta is None:
        return "-"
    return ("+" if delta >= 0 else "-") + ms(abs(delta))


def ms(value: float) -> str:
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.2f} s"


def _widths(rows: Iterable[tuple[str, ...]]) -> list[int]:
    table = list(rows)
    return [max(len(row[column]) for row in table) for column in range(len(table[0]))]


def _line(
    row: tuple[str, ...], widths: list[int], paints: dict[int, Callable[[str], str]] | None = None
) -> str:
    """The cells padded to their column's width (before any colour, which adds invisible characters)."""
    cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
    for column, paint in (paints or {}).items():
        cells[column] = paint(row[column]) + " " * (widths[column] - len(row[column]))
    return "  ".join(cells).rstrip()


def short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def history_table(name: str, versions: list[Version], *, colour: bool = False) -> str:
    """`blockyard eval --history NAME`: one line per flow version, oldest first, each against the one before."""
    paint = Paint(colour)
    if not versions:
        return f"eval {name}: no results kept yet (run `blockyard eval {name}`)\n"
    targets = list(dict.fromkeys(version.target for version in versions))
    lines = [
        paint.bold(f"eval {name}")
        + paint.dim(
            f"  {', '.join(targets)} · {len(versions)} version"
            f"{'s' if len(versions) != 1 else ''}, oldest first"
        )
    ]
    rows = [
        (
            "version",
            "first run",
            "runs",
            "revision",
            "cases",
            "pass rate",
            "mean score",
            "cost",
            "latency",
        )
    ]
    before: Version | None = None
    for version in versions:
        cost = (
            money(version.cost_usd)
            if not version.unpriced_calls
            else f">= {money(version.cost_usd)}"
        )
        if before is not None and version.cost_usd != before.cost_usd:
            cost += f" ({signed_money(version.cost_usd - before.cost_usd)})"
        shown = (version.digest or "-")[:8] + (
            f" v{version.version}" if version.version is not None else ""
        )
        rows.append(
            (
                shown,
                version.first.replace("T", " ")[:16],
                str(version.runs),
                _revision(version),
                f"{version.passed}/{version.cases}",
                pair(before.pass_rate if before else None, version.pass_rate, None),
                pair(before.mean_score if before else None, version.mean_score, "{:.2f}"),
                cost,
                ms(version.latency_ms),
            )
        )
        before = version
    widths = _widths(rows)
    lines.append(paint.dim("  " + _line(rows[0], widths)))
    lines += ["  " + _line(row, widths) for row in rows[1:]]
    return "\n".join(lines) + "\n"


def _revision(version: Version) -> str:
    if version.revision and version.label == "working tree":
        return f"working tree at {version.revision[:7]}"
    return version.label
