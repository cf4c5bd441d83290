"""`blockyard eval --junit FILE`: the working tree's results as JUnit XML, which CI test reporters read
(GitHub's test-reporter actions, GitLab, Jenkins): one `testsuite` per eval, one `testcase` per case,
its failed assertions in `<failure>`, its judges' reasoning, score, cost and latency in `<system-out>`.
An eval that missed a threshold has one more `testcase` named `thresholds`, failed, so that a reporter
shows why the job failed. Written with the standard library (xml.etree).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from engine.evals.outcome import Outcome
from engine.evals.results import CaseResult, EvalResult

_NOT_XML = {code: None for code in range(32) if code not in (9, 10, 13)}  # XML 1.0 forbids them


def render(outcome: Outcome) -> str:
    root = ET.Element("testsuites", name="blockyard eval")
    tests = failures = 0
    total_time = 0.0
    for result in outcome.head:
        suite = _suite(result)
        root.append(suite)
        tests += int(suite.get("tests", "0"))
        failures += int(suite.get("failures", "0"))
        total_time += float(suite.get("time", "0"))
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", "0")
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(outcome: Outcome, path: Path) -> None:
    path.write_text(render(outcome), encoding="utf-8")


def _suite(result: EvalResult) -> ET.Element:
    suite = ET.Element("testsuite", name=_text(result.name), file=_text(result.file))
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("target", result.target),
        ("digest", result.digest or ""),
        ("pass_rate", f"{result.pass_rate:.4f}"),
        ("mean_score", f"{result.mean_score:.4f}"),
        ("cost", result.spend.cost_text()),
    ):
        ET.SubElement(properties, "property", name=name, value=_text(value))
    failures = 0
    seconds = 0.0
    for case in result.cases:
        suite.append(_case(result, case))
        failures += not case.passed
        seconds += case.latency_ms / 1000
    misses = result.misses
    if misses:
        thresholds = ET.SubElement(
            suite, "testcase", classname=_text(result.name), name="thresholds", time="0"
        )
        failure = ET.SubElement(
            thresholds, "failure", message=_text("; ".join(misses)), type="threshold"
        )
        failure.text = _text("\n".join(misses))
        failures += 1
    suite.set("tests", str(len(result.cases) + (1 if misses else 0)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    suite.set("time", f"{seconds:.3f}")
    return suite


def _case(result: EvalResult, case: CaseResult) -> ET.Element:
    element = ET.Element(
        "testcase",
        classname=_text(result.name),
        name=_text(case.case),
        time=f"{case.latency_ms / 1000:.3f}",
        file=_text(case.where.split(":")[0]),
    )
    failures = case.failures
    if failures:
        failure = ET.SubElement(element, "failure", message=_text(failures[0]), type="assertion")
        failure.text = _text("\n".join(failures))
    said = [
        f"score {case.score:.2f} · cost {case.spend.cost_text()} · latency {case.latency_ms:.0f} ms · "
        f"{case.where}"
    ]
    said += [f"{label}: {reasoning}" for label, reasoning in case.reasons]
    out = ET.SubElement(element, "system-out")
    out.text = _text("\n".join(said))
    return element


def _text(value: str) -> str:
    return value.translate(_NOT_XML)
