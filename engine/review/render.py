"""`blockyard diff` as text, JSON or Markdown (a pull-request comment with a Mermaid graph of each
changed flow: added steps green, removed ones red and dashed, changed ones yellow)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from engine.review.changes import ADDED, AFFECTED, REMOVED, BlockDiff, FlowDiff, InFlight, YardDiff

FORMATS = ("text", "json", "markdown")
MARKS = {"added": "+", "removed": "-", "changed": "~", "renamed": "→", "affected": "·"}


def render(diff: YardDiff, fmt: str) -> str:
    renderer: Callable[[YardDiff], str] = {"text": text, "json": as_json, "markdown": markdown}[fmt]
    return renderer(diff)


def as_json(diff: YardDiff) -> str:
    return json.dumps(diff.as_dict(), ensure_ascii=False, indent=2) + "\n"


def summary(diff: YardDiff) -> str:
    if not diff.changed:
        return "no differences"
    parts = []
    for label, items in (("flow", diff.flows), ("block", diff.blocks)):
        counts: dict[str, int] = {}
        for item in items:
            counts[item.status] = counts.get(item.status, 0) + 1
        if counts:
            total = len(items)
            parts.append(
                f"{total} {label}{'s' if total != 1 else ''} ("
                + ", ".join(f"{n} {status}" for status, n in counts.items())
                + ")"
            )
    if diff.config:
        parts.append("blockyard.yaml changed")
    if diff.problems:
        errors = len(diff.problems)
        parts.append(f"{errors} version problem{'s' if errors != 1 else ''}")
    return "; ".join(parts)


def _title(item: FlowDiff | BlockDiff, kind: str) -> str:
    name = f"{item.old_name} → {item.name}" if item.old_name else item.name
    where = (
        f"{item.old_file} → {item.file}"
        if item.old_file and item.file
        else (item.file or item.old_file or "")
    )
    old, new = item.versions
    version = (
        f"v{old} → v{new}"
        if old is not None and new is not None and old != new
        else f"v{new if new is not None else old}"
    )
    return f"{kind} {name} ({item.status}, {version}) {where}".rstrip()


def _flow_lines(flow: FlowDiff) -> list[str]:
    lines = [f"{MARKS[flow.status]} {_title(flow, 'flow')}"]
    if flow.through:
        lines.append("    through: " + ", ".join(flow.through))
    if flow.status in (ADDED, REMOVED):
        lines.append(f"    steps: {', '.join(s.id for s in flow.steps)}")
        return lines
    lines += [f"    {line}" for line in flow.settings]
    for step in flow.steps:
        lines.append(f"    {MARKS[step.status]} step {step.id} {step.status}")
        lines += [f"        {detail}" for detail in step.details]
    lines += [f"    + edge {edge}" for edge in flow.edges_added]
    lines += [f"    - edge {edge}" for edge in flow.edges_removed]
    return lines


def _block_lines(block: BlockDiff) -> list[str]:
    lines = [f"{MARKS[block.status]} {_title(block, 'block')}"]
    for change in block.contract:
        judged = f"breaking: {', '.join(change.steps)}" if change.breaking else "compatible"
        lines.append(f"    contract: {change.text} — {judged}")
    lines += [f"    {line}" for line in block.prompt]
    lines += [f"    {line}" for line in block.model]
    lines += [f"    {line}" for line in block.other]
    if block.used_by and block.status != ADDED:
        lines.append(f"    used by: {', '.join(block.used_by)}")
    return lines


def _inflight_lines(inflight: InFlight) -> list[str]:
    lines = [f"in flight ({inflight.source}):"]
    if not (inflight.runs or inflight.schedules or inflight.threads):
        lines.append("    nothing the change touches")
    for run in inflight.runs:
        lines.append(
            f"    run {run.run_id} ({run.flow}, paused at {run.step or '?'}): {run.detail}"
        )
    for schedule in inflight.schedules:
        lines.append(f"    schedule of {schedule.flow}: {schedule.detail}")
    for thread in inflight.threads:
        lines.append(f"    thread {thread.thread} ({thread.flow}): {thread.detail}")
    return lines


def text(diff: YardDiff) -> str:
    lines = [f"blockyard diff: {diff.base} → {diff.head}"]
    for flow in diff.flows:
        lines += _flow_lines(flow)
    for block in diff.blocks:
        lines += _block_lines(block)
    if diff.config:
        lines.append("~ blockyard.yaml")
        lines += [f"    {line}" for line in diff.config]
    if diff.problems:
        lines.append("version policy:")
        lines += [f"    {d.format()}" for d in diff.problems]
    if diff.inflight is not None:
        lines += _inflight_lines(diff.inflight)
    lines.append(summary(diff))
    return "\n".join(lines) + "\n"


# ---- Markdown ------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text inside a Markdown table cell: pipes escaped (in code spans too: the table splits first),
    no line breaks."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """An inline code span that holds any text: YAML values are shown, never read as Markdown or HTML."""
    text = text.replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}" if longest else f"`{text}`"


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in the lines it holds."""
    longest = max((len(run) for line in lines for run in re.findall(r"`{3,}", line)), default=0)
    return "`" * max(3, longest + 1)


def markdown(diff: YardDiff) -> str:
    out = [
        f"## Blockyard diff: {_code(diff.base)} → {_code(diff.head)}",
        "",
        f"**{summary(diff)}**",
        "",
    ]
    if diff.problems:
        out += ["### Version policy", "", "| where | code | problem |", "| --- | --- | --- |"]
        out += [
            f"| {_cell(_code(f'{d.file}:{d.line}:{d.col}'))} | {d.code} | {_cell(_code(d.message))} |"
            for d in diff.problems
        ]
        out.append("")
    for flow in diff.flows:
        out += _flow_markdown(flow)
    if diff.blocks:
        out += ["### Blocks", ""]
        for block in diff.blocks:
            out += _block_markdown(block)
    if diff.config:
        out += ["### blockyard.yaml", "", *(f"- {_code(line)}" for line in diff.config), ""]
    if diff.inflight is not None:
        out += [
            "### In flight",
            "",
            *(f"- {_code(line.strip())}" for line in _inflight_lines(diff.inflight)[1:]),
        ]
        out += ["", f"Source: {_code(diff.inflight.source)}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _flow_markdown(flow: FlowDiff) -> list[str]:
    out = [f"### {MARKS[flow.status]} {_cell(_title(flow, 'flow'))}", ""]
    if flow.through:
        out += [f"Changes through {', '.join(_code(t) for t in flow.through)}.", ""]
    rows = [
        (_code(s.id), s.status, s.details)
        for s in flow.steps
        if flow.status not in (ADDED, REMOVED)
    ]
    rows += [("flow", "changed", [line]) for line in flow.settings]
    rows += [("edge", "added", [edge]) for edge in flow.edges_added]
    rows += [("edge", "removed", [edge]) for edge in flow.edges_removed]
    if rows:
        out += ["| what | change | details |", "| --- | --- | --- |"]
        out += [
            f"| {_cell(what)} | {status} | {_cell('<br>'.join(_code(d) for d in details))} |"
            for what, status, details in rows
        ]
        out.append("")
    if flow.steps and flow.status in (ADDED, REMOVED):
        out += [f"Steps: {', '.join(_code(s.id) for s in flow.steps)}.", ""]
    if flow.graph is not None:
        graph = flow.graph.rstrip("\n").split("\n")
        out += [f"{_fence(graph)}mermaid", *graph, _fence(graph), ""]
    elif flow.graph_note and flow.status != AFFECTED:
        out += [f"_{flow.graph_note}_", ""]
    return out


def _block_markdown(block: BlockDiff) -> list[str]:
    out = [f"#### {MARKS[block.status]} {_cell(_title(block, 'block'))}", ""]
    for change in block.contract:
        judged = (
            f"**breaking** for {', '.join(_code(s) for s in change.steps)}"
            if change.breaking
            else "compatible"
        )
        out.append(f"- contract: {_code(change.text)} — {judged}")
    out += [f"- {_code(line)}" for line in [*block.prompt, *block.model, *block.other]]
    if block.used_by and block.status != ADDED:
        out.append(f"- used by: {', '.join(_code(f) for f in block.used_by)}")
    if block.prompt_diff:
        fence = _fence(block.prompt_diff)
        out += [
            "",
            "<details><summary>prompt diff</summary>",
            "",
            f"{fence}diff",
            *block.prompt_diff,
            fence,
            "",
            "</details>",
        ]
    out.append("")
    return out
