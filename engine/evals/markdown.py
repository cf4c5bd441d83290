"""`blockyard eval --markdown FILE`: the results as GitHub Markdown, for a pull request's comment and a
job's summary (the Action puts it under the semantic diff: action.yml, docs/evals.md).

Without `--base`: one row per eval, then the failed cases with why. With `--base`: one row per eval with
the deltas of pass rate, score, cost and latency, then the cases whose result changed (pass→fail first),
the evals not run because nothing they use changed; every case and the judges' reasoning fold away in
`<details>`.
"""

from __future__ import annotations

from engine.evals.compare import FAIL_TO_PASS, NEW, PASS_TO_FAIL, Comparison
from engine.evals.outcome import Outcome
from engine.evals.report import cost_pair, delta_ms, ms, pair, pair_text
from engine.evals.results import CaseResult, EvalResult, percent, signed_money

HEADING = "## Blockyard evals"
OK, FAIL, REGRESSION = "✅", "❌", "⚠️"


def render(outcome: Outcome) -> str:
    lines = [
        HEADING
        if outcome.base_label is None
        else f"{HEADING}: `{_code(outcome.base_label)}` → `{_code(outcome.head_label)}`",
        "",
    ]
    if outcome.base_label is None:
        lines.extend(_summary(outcome))
        for result in outcome.head:
            lines.extend(_failed(result))
        lines.extend(_all_cases(outcome.head))
    else:
        lines.extend(_comparison(outcome))
    lines.extend(_reasoning(outcome.results))
    lines.append(f"<sub>{_cell(outcome.cache_line())} · {outcome.seconds:.1f} s</sub>")
    return "\n".join(lines) + "\n"


def _summary(outcome: Outcome) -> list[str]:
    if not outcome.head:
        return ["No evals ran.", ""]
    lines = [
        "| eval | target | cases | pass rate | mean score | cost | mean latency | result |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for result in outcome.head:
        verdict = f"{OK} ok" if result.ok else f"{FAIL} " + _cell("; ".join(result.misses))
        lines.append(
            f"| {_cell(result.name)} | {_target(result)} | {len(result.cases)} | "
            f"{percent(result.pass_rate)} | {result.mean_score:.2f} | {result.spend.cost_text()} | "
            f"{ms(result.mean_latency_ms)} | {verdict} |"
        )
    return [*lines, ""]


def _failed(result: EvalResult) -> list[str]:
    failed = [case for case in result.cases if not case.passed]
    if not failed:
        return []
    lines = [
        f"**{FAIL} {_cell(result.name)}**: {len(failed)} of {len(result.cases)} cases failed",
        "",
        "| case | score | cost | latency | why |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {_cell(case.case)} | {case.score:.2f} | {case.spend.cost_text()} | {ms(case.latency_ms)} | "
        f"{_cell('; '.join(case.failures))} |"
        for case in failed
    ]
    return [*lines, ""]


def _all_cases(results: list[EvalResult]) -> list[str]:
    if not any(result.cases for result in results):
        return []
    lines = [
        "<details><summary>Every case</summary>",
        "",
        "| eval | case | result | score | cost | latency |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {_cell(result.name)} | {_cell(case.case)} | {_result(case)} | {case.score:.2f} | "
        f"{case.spend.cost_text()} | {ms(case.latency_ms)} |"
        for result in results
        for case in result.cases
    ]
    return [*lines, "", "</details>", ""]


def _comparison(outcome: Outcome) -> list[str]:
    lines: list[str] = []
    if outcome.comparisons:
        lines += [
            "| eval | target | pass rate | mean score | cost | mean latency | result |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        lines += [
            _compared_row(comparison, outcome.tolerance) for comparison in outcome.comparisons
        ]
        lines.append("")
    else:
        lines += ["No eval's flow or block changed between the revisions: nothing to compare.", ""]
    changed = [
        (comparison, change)
        for comparison in outcome.comparisons
        for change in comparison.cases
        if change.change in (PASS_TO_FAIL, FAIL_TO_PASS, NEW) or change.score_delta
    ]
    changed.sort(key=lambda item: {PASS_TO_FAIL: 0, FAIL_TO_PASS: 1, NEW: 2}.get(item[1].change, 3))
    if changed:
        lines += [
            "**Cases that changed**",
            "",
            "| eval | case | base → head | score | cost | why |",
            "| --- | --- | --- | ---: | ---: | --- |",
        ]
        for comparison, change in changed:
            old = change.base
            shown = (
                f"{_result(old)} → {_result(change.head)}"
                if old is not None
                else f"new: {_result(change.head)}"
            )
            why = "; ".join(change.head.failures) if change.change in (PASS_TO_FAIL, NEW) else ""
            lines.append(
                f"| {_cell(comparison.name)} | {_cell(change.case)} | {shown} | "
                f"{pair(old.score if old else None, change.head.score, '{:.2f}')} | "
                f"{_cell(cost_pair(old, change.head))} | {_cell(why)} |"
            )
        lines.append("")
    if outcome.unchanged:
        names = ", ".join(
            f"`{_code(name)}` ({_cell(target)})" for name, target in outcome.unchanged
        )
        lines += [f"Not run, unchanged between the revisions: {names}.", ""]
    every = [comparison.head for comparison in outcome.comparisons]
    lines.extend(_all_cases(every))
    return lines


def _compared_row(comparison: Comparison, tolerance: float) -> str:
    head, base = comparison.head, comparison.base
    if head.problem is not None:
        return f"| {_cell(head.name)} | {_target(head)} | | | | | {FAIL} not run: {_cell(head.problem)} |"
    comparable = comparison.comparable and base is not None
    old = base if comparable else None
    cost = pair_text(old.spend.cost_text() if old else None, head.spend.cost_text())
    if comparison.cost_delta:
        cost += f" ({signed_money(comparison.cost_delta)})"
    regressions = comparison.regressions(tolerance)
    if regressions:
        verdict = f"{REGRESSION} regression: " + _cell("; ".join(regressions))
    elif not head.ok:
        verdict = f"{FAIL} " + _cell("; ".join(head.misses))
    else:
        verdict = f"{OK} ok" if comparable else f"{OK} ok (head only)"
    return (
        f"| {_cell(head.name)} | {_target(head)} | {pair(old.pass_rate if old else None, head.pass_rate, None)} | "
        f"{pair(old.mean_score if old else None, head.mean_score, '{:.2f}')} | {_cell(cost)} | "
        f"{delta_ms(comparison.latency_delta_ms) if comparable else ms(head.mean_latency_ms)} | {verdict} |"
    )


def _reasoning(results: list[EvalResult]) -> list[str]:
    rows = [
        (result, case, label, check_score, reasoning)
        for result in results
        for case in result.cases
        for (label, reasoning), check_score in zip(case.reasons, _judge_scores(case), strict=True)
    ]
    if not rows:
        return []
    lines = [
        "<details><summary>What the judges said</summary>",
        "",
        "| eval | side | case | judge | score | reasoning |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    lines += [
        f"| {_cell(result.name)} | {result.side} | {_cell(case.case)} | {_cell(label)} | {score:.2f} | "
        f"{_cell(reasoning)} |"
        for result, case, label, score, reasoning in rows
    ]
    return [*lines, "", "</details>", ""]


def _judge_scores(case: CaseResult) -> list[float]:
    return [check.score for check in case.checks if check.reasoning is not None]


def _result(case: CaseResult) -> str:
    return f"{OK} pass" if case.passed else f"{FAIL} fail"


def _target(result: EvalResult) -> str:
    kind, _, name = result.target.partition(" ")
    return f"{kind} `{_code(name)}`"


def _cell(text: str) -> str:
    """Text inside a table cell: one line, pipes escaped, HTML not interpreted."""
    flat = " ".join(text.split())
    return flat.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    return text.replace("`", "'")
