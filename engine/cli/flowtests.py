"""`blockyard test`: flow tests in `flows/*.test.yaml` — scripted model replies, approval
decisions in order, and expectations on the run's status, outputs and error.

```yaml
flow: hello
tests:
  - name: greets by name
    inputs: {name: Ada}
    replies: {greet: [{greeting: Hello Ada}]}      # like a mock profile's `replies`
    decisions: [{approve: true, values: {}}]        # applied in order while the run waits
    expect: {status: finished, outputs: {loud: HELLO ADA}}
  - name: remembers the name                        # `turns`: one conversation thread, turn by turn
    turns:
      - {inputs: {message: My name is Ada}}
      - {inputs: {message: What is my name?}, expect: {outputs: {reply: Your name is Ada.}}}
```
Each test runs in a throw-away state database, and its file tools write to a throw-away workspace
(whatever the flow's `output_dir` says), so tests never touch `.blockyard/` or the yard's files. The
file format is engine/spec/flowtest.py.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from engine.cli.options import ROOT_OPTION, Command, root_of
from engine.core.diagnostics import Diagnostic
from engine.core.errors import BlockyardError, UsageError, ValidationFailed
from engine.core.events import WARNING, RunStatus
from engine.core.values import JsonDict
from engine.definitions.files import Bounds, argument_bounds, list_files
from engine.definitions.load import LoadError, load_file
from engine.definitions.project import relative
from engine.models import scripted
from engine.models.replies import reply_problems
from engine.spec.flowtest import Decision, Expect, FlowTest, SuiteFile
from engine.state.written import files_written

if TYPE_CHECKING:
    from engine.runtime.execution import RunResult

TEST_SUFFIXES = (".test.yaml", ".test.yml")


@dataclass
class Outcome:
    file: str
    test: str
    problems: list[str]


def find_test_files(root: Path, paths: list[Path]) -> list[Path]:
    """The test files under flows/ or the given paths; a link among them that leads out of the yard,
    or a FIFO or device with a test file's name, fails the command (its target is never read)."""
    if not paths:
        return _listed(root / "flows", Bounds.of(root), root)
    found: list[Path] = []
    for path in paths:
        if not os.path.lexists(path):
            raise UsageError(f"no such file or folder: {path}")
        if path.is_dir():
            found.extend(_listed(path, argument_bounds(path, root) or Bounds.of(path), root))
        else:
            found.append(path)  # read by load_tests, which refuses what must not be read
    return found


def _listed(folder: Path, bounds: Bounds, root: Path) -> list[Path]:
    listing = list_files(folder, bounds, _is_test, lambda path: relative(path, root))
    if listing.refused:
        raise BlockyardError(
            "\n".join(
                Diagnostic(relative(path, root), 1, 1, refusal.code, refusal.message).format()
                for path, refusal in listing.refused
            )
        )
    return listing.files


def _is_test(name: str) -> bool:
    return name.endswith(TEST_SUFFIXES)


def load_tests(path: Path, root: Path) -> SuiteFile:
    try:
        doc = load_file(path, relative(path, root), bounds=argument_bounds(path, root))
    except LoadError as exc:
        raise BlockyardError(exc.diagnostic.format()) from None
    try:
        suite = SuiteFile.model_validate(doc.data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = tuple(part for part in error["loc"] if isinstance(part, str | int))
            line, col = doc.where(loc, key=error["type"] == "extra_forbidden")
            lines.append(
                Diagnostic(
                    doc.display,
                    line,
                    col,
                    "BY700",
                    f"{'.'.join(map(str, loc)) or 'file'}: {error['msg']}",
                ).format()
            )
        raise BlockyardError("\n".join(lines)) from None
    lines = [
        doc.diag(
            ("tests", number, "replies", key, position, *where),
            "BY516",
            f"test '{test.name}', reply {position + 1} for '{key}': {problem}",
        ).format()
        for number, test in enumerate(suite.tests)
        for key, replies in test.replies.items()
        for position, reply in enumerate(replies)
        for where, problem in reply_problems(reply)
    ]
    if lines:
        raise BlockyardError("\n".join(lines))
    return suite


def run_test(yard: Any, flow: str, test: FlowTest, run_id: str) -> list[str]:
    """The problems of one test ([] when it passes). A test with `turns` takes them as the turns
    of one new conversation thread (named after the test's run id), stopping at the first that fails."""
    if not test.turns:
        return _run(yard, flow, test, test.inputs, test.decisions, test.expect, run_id)
    for number, turn in enumerate(test.turns, start=1):
        problems = _run(
            yard,
            flow,
            test,
            turn.inputs,
            turn.decisions,
            turn.expect,
            f"{run_id}-turn-{number}",
            thread=run_id,
        )
        if problems:
            return [f"turn {number}: {problem}" for problem in problems]
    return []


def _run(
    yard: Any,
    flow: str,
    test: FlowTest,
    inputs: JsonDict,
    decisions: list[Decision],
    expect: Expect,
    run_id: str,
    thread: str | None = None,
) -> list[str]:
    with scripted(run_id, test.replies):
        try:
            result: RunResult = yard.run(flow, inputs, run_id=run_id, thread=thread)
            for decision in decisions:
                if result.status != RunStatus.WAITING:
                    return [
                        f"run is {result.status}, not waiting, when a decision is left to apply"
                    ]
                result = yard.resume(
                    run_id,
                    approve=decision.approve,
                    values=decision.values,
                    reason=decision.reason,
                    gate=decision.gate,
                    actor=decision.actor,
                )
        except (
            ValidationFailed
        ) as exc:  # the flow under test (or what it uses) is broken: its diagnostics
            return [d.format() for d in exc.diagnostics if d.severity == "error"] or [str(exc)]
        except BlockyardError as exc:
            return [f"error: {exc}"]
    problems = []
    if result.status != expect.status:
        why = f" ({result.error})" if result.error else ""
        problems.append(f"status is {result.status}{why}, expected {expect.status}")
    outputs = result.outputs or {}
    for key, want in expect.outputs.items():
        if key not in outputs:
            problems.append(
                f"output '{key}' missing (outputs: {', '.join(sorted(outputs)) or 'none'})"
            )
        elif outputs[key] != want:
            problems.append(f"output '{key}' is {outputs[key]!r}, expected {want!r}")
    if expect.error is not None and expect.error not in (result.error or ""):
        problems.append(f"error {result.error!r} does not contain {expect.error!r}")
    problems.extend(
        f"output '{key}' is {outputs[key]!r}, expected none"
        for key in expect.absent
        if key in outputs
    )
    if expect.warnings or expect.files:
        problems.extend(_trace_problems(yard, run_id, expect))
    return problems


def _trace_problems(yard: Any, run_id: str, expect: Expect) -> list[str]:
    """What the run's warnings and written files lack of what the test expects."""
    events = yard.events(run_id)
    said = [str(e.data.get("message", "")) for e in events if e.type == WARNING]
    problems = [
        f"no warning contains {text!r} (warnings: {'; '.join(said) or 'none'})"
        for text in expect.warnings
        if not any(text in message for message in said)
    ]
    written = [entry["path"] for entry in files_written(events)]
    folder = yard.engine.workspace(run_id)
    for path, text in expect.files.items():
        if path not in written:
            problems.append(
                f"file '{path}' was not written (written: {', '.join(sorted(written)) or 'none'})"
            )
            continue
        try:
            content = (folder / path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            problems.append(f"file '{path}' cannot be read: {exc.strerror or exc}")
            continue
        if text not in content:
            problems.append(f"file '{path}' does not contain {text!r}")
    return problems


def flowtest_command(root: Path, paths: list[Path]) -> int:
    from engine.runtime.yard import Yard  # LangGraph: only when tests run

    files = find_test_files(root, paths)
    if not files:
        click.echo("no flow tests found (flows/*.test.yaml)", err=True)
        return 1
    outcomes: list[Outcome] = []
    suites = [
        (relative(path, root), load_tests(path, root)) for path in files
    ]  # bad files fail first
    with (
        tempfile.TemporaryDirectory(prefix="blockyard-test-") as scratch,
        Yard.load(root, state=Path(scratch) / "state.db") as yard,
    ):
        yard.engine.output_dirs = (
            False  # a test's files go to its scratch workspace, never into the yard
        )
        for number, (shown, suite) in enumerate(suites):
            for index, test in enumerate(suite.tests):
                problems = run_test(yard, suite.flow, test, f"test-{number}-{index}")
                outcomes.append(Outcome(shown, test.name, problems))
                click.echo(f"{'PASS' if not problems else 'FAIL'} {shown}: {test.name}")
                for problem in problems:
                    click.echo(f"     {problem}")
    failed = sum(1 for o in outcomes if o.problems)
    click.echo(f"{len(outcomes) - failed} passed, {failed} failed")
    return 1 if failed else 0


# ---- the commands ---------------------------------------------------------------------------------


@click.command("test", cls=Command)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@ROOT_OPTION
def test_(paths: tuple[Path, ...], root: Path | None) -> None:
    """Run flow tests (flows/*.test.yaml): scripted model replies, decisions, expected outputs."""
    raise SystemExit(flowtest_command(root_of(root), list(paths)))
