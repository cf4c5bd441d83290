"""One cron grammar: `validate`, `blockyard schedules` and the server's scheduler judge every expression alike.

Each expression of the table is the schedule of a flow in one real yard. `validate` reports it (or
not); `blockyard schedules --json` shows the same problem (or a next fire time); and the scheduler,
handed a catalog that serves every flow as if the expression had slipped past validation, fires an
accepted one at the expected time and never crashes on a refused one.
"""

from __future__ import annotations

import ast
import asyncio
import io
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.cli.serve import schedules_command
from engine.definitions.project import load_project
from engine.serve.catalog import Catalog, FlowEntry, build_catalog
from engine.serve.clock import ManualClock
from engine.serve.schedules import Scheduler, ScheduleStore
from engine.spec.cron import cron_problem, never_fires_problem, timezone_problem
from engine.validate.command import validate

NOTE = """\
block: note
description: Write a fixed note.
kind: transform
outputs:
  note: {type: string}
compute:
  note: "'noted'"
"""

START = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# cron -> the first fire time after START (UTC), or the code validate reports
TABLE: list[tuple[str, datetime | str]] = [
    ("0 11 * * TUE", at("2026-01-06T11:00")),
    ("*/15 9-17 * * MON-FRI", at("2026-01-01T09:00")),
    ("0 0 1,15 * *", at("2026-01-15T00:00")),
    ("10/20 * * * *", at("2026-01-01T00:10")),
    ("0 8-18/5 * * *", at("2026-01-01T08:00")),
    ("30 6 * * 7", at("2026-01-04T06:30")),  # 7 is Sunday
    ("0 0 1 * MON", at("2026-01-05T00:00")),  # day of month OR day of week
    ("0 0 ? * MON", at("2026-01-05T00:00")),
    ("0 12 L * *", at("2026-01-31T12:00")),
    ("0 0 L 2 *", at("2026-02-28T00:00")),
    ("0 9 * * 5#3", at("2026-01-16T09:00")),
    ("0 0 * * 1#5", at("2026-03-30T00:00")),  # the first month with five Mondays
    ("0 9 * * 5L", at("2026-01-30T09:00")),
    ("0 9 * * L5", at("2026-01-30T09:00")),
    ("0 0 29 2 *", at("2028-02-29T00:00")),
    ("0 0 * 2 5#5", at("2036-02-29T00:00")),  # 20 years to the next February 29th on a Friday
    ("@daily", at("2026-01-02T00:00")),
    ("@midnight", at("2026-01-02T00:00")),
    ("@hourly", at("2026-01-01T01:00")),
    ("@weekly", at("2026-01-04T00:00")),
    ("@monthly", at("2026-02-01T00:00")),
    ("@yearly", at("2027-01-01T00:00")),
    ("@ANNUALLY", at("2027-01-01T00:00")),
    ("0 11 * *", "BY507"),
    ("0 9 * * * *", "BY507"),  # a seconds field
    ("60 * * * *", "BY507"),
    ("0 0 * FOO *", "BY507"),
    ("0 0 * * FRI-MON", "BY507"),  # backwards
    ("5-5 * * * *", "BY507"),  # croniter would read it as every minute
    ("R 0 * * *", "BY507"),  # random: another time at every reading
    ("0 0 15W * *", "BY507"),
    ("0 0 1 * 5#3", "BY507"),  # croniter would require both
    ("0 0 * * 5#3,1", "BY507"),
    ("@reboot", "BY507"),
    ("0 0 30 2 *", "BY510"),
    ("0 0 31 4,6,9,11 *", "BY510"),
    ("0 0 30-31 2 *", "BY510"),
]


def _name(index: int) -> str:
    return f"c{index:02d}"


@pytest.fixture(scope="module")
def table_yard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cron_table")
    (root / "blocks").mkdir()
    (root / "flows").mkdir()
    (root / "blocks/note.yaml").write_text(NOTE)
    for index, (cron, _) in enumerate(TABLE):
        (root / f"flows/{_name(index)}.yaml").write_text(
            f"flow: {_name(index)}\nschedule:\n  cron: {json.dumps(cron)}\n  timezone: UTC\n"
            "steps:\n  - id: noted\n    uses: note\n"
        )
    return root


def test_validate_schedules_and_the_scheduler_agree_on_every_expression(table_yard: Path) -> None:
    report = validate([], table_yard)
    found = {(d.file, d.code): d for d in report.diagnostics}
    assert all(d.code in ("BY507", "BY510") for d in report.diagnostics), report.diagnostics
    out = io.StringIO()
    exit_code = schedules_command(table_yard, as_json=True, out=out)
    rows = {row["flow"]: row for row in json.loads(out.getvalue())}
    scheduler, catalog = _scheduler_serving_everything(table_yard)

    disagreements = []
    for index, (cron, expected) in enumerate(TABLE):
        name = _name(index)
        entry = catalog.flows[name]
        validated = [code for code in ("BY507", "BY510") if (f"flows/{name}.yaml", code) in found]
        fire = scheduler.next_fire(entry)
        row = rows[name]
        if isinstance(expected, datetime):
            seen = (validated, fire, row["problem"], row["next_fire"] is not None)
            if seen != ([], expected, None, True):
                disagreements.append((cron, seen))
        else:
            diagnostic = found.get((f"flows/{name}.yaml", expected))
            message = diagnostic.message.removeprefix("schedule: ") if diagnostic else None
            refused = (validated, fire, row["problem"], row["next_fire"])
            if (
                refused != ([expected], None, message, None)
                or message is None
                or cron not in message
            ):
                disagreements.append((cron, refused))
    assert disagreements == []
    assert exit_code == 1


def test_the_scheduler_does_not_crash_on_a_schedule_that_slipped_through(table_yard: Path) -> None:
    scheduler, _ = _scheduler_serving_everything(table_yard)
    fired: list[tuple[str, datetime]] = []

    async def fire(entry: FlowEntry, when: datetime) -> str:
        fired.append((entry.name, when))
        return f"run-{len(fired)}"

    scheduler.fire = fire
    clock = scheduler.clock
    assert isinstance(clock, ManualClock)

    async def ticks() -> None:
        await scheduler.tick(clock.now())  # every schedule begins
        clock.set(at("2026-01-01T00:10:30"))
        await scheduler.tick(clock.now())

    asyncio.run(ticks())
    assert fired == [
        (_name(TABLE.index(("10/20 * * * *", at("2026-01-01T00:10")))), at("2026-01-01T00:10"))
    ]


def _scheduler_serving_everything(root: Path) -> tuple[Scheduler, Catalog]:
    project = load_project(root)
    catalog = build_catalog(project, [], Catalog())  # no diagnostics: every flow is served
    assert len(catalog.flows) == len(TABLE)

    async def never(entry: FlowEntry, when: datetime) -> str:
        raise AssertionError("nothing fires here")

    scheduler = Scheduler(
        ScheduleStore(root / ".blockyard/state.db"), ManualClock(START), lambda: catalog, never
    )
    return scheduler, catalog


@pytest.mark.parametrize(
    ("cron", "problem"),
    [
        ("0 11 * *", "cron '0 11 * *' has 4 fields; use five"),
        ("0 9 * * * *", "cron '0 9 * * * *' has 6 fields; use five"),
        (
            "60 * * * *",
            "cron '60 * * * *': minute '60' is not valid: out of range; the minute takes 0-59",
        ),
        (
            "0 0 * FOO *",
            "cron '0 0 * FOO *': month 'FOO' is not valid; the month takes 1-12 or JAN-DEC",
        ),
        (
            "0 0 * * FRI-MON",
            "cron '0 0 * * FRI-MON': day of week 'FRI-MON' has the range FRI-MON, which runs backwards",
        ),
        (
            "5-5 * * * *",
            "cron '5-5 * * * *': minute '5-5' has the range 5-5, which names one value: write 5",
        ),
        ("*/0 * * * *", "cron '*/0 * * * *': minute '*/0' is not valid: a step must be 1 or more"),
        ("1,,2 * * * *", "cron '1,,2 * * * *': minute '1,,2' has an empty list entry"),
        (
            "H 0 * * *",
            "cron 'H 0 * * *': minute 'H' uses a random ('R') or hashed ('H') value, which is not supported",
        ),
        (
            "0 0 15W * *",
            "cron '0 0 15W * *': day of month '15W' uses 'W' (nearest weekday), which is not supported",
        ),
        (
            "0 0 1 * 5#3",
            "cron '0 0 1 * 5#3': day of week '5#3' uses '#' or 'L', which can't be combined with a day of "
            "month ('1')",
        ),
        (
            "? 0 * * *",
            "cron '? 0 * * *': minute '?' is not valid: '?' is only for the day of month and the day of week",
        ),
        ("@every", "cron '@every': unknown macro '@every'; use one of @yearly, @annually"),
    ],
)
def test_refused_expressions_say_why(cron: str, problem: str) -> None:
    found = cron_problem(cron)
    assert found is not None and found.startswith(problem), found
    # one problem at a time: BY510 only for a valid expression
    assert never_fires_problem(cron) is None


def test_the_never_fires_search_is_bounded() -> None:
    started = time.perf_counter()
    assert never_fires_problem("59 23 31 2,4,6,9,11 *") == (
        "cron '59 23 31 2,4,6,9,11 *' never fires: no date in the next 50 years matches it "
        "(is the day of month one the month has?)"
    )
    assert time.perf_counter() - started < 0.5
    # the rarest valid expression: 40 years apart at worst
    assert never_fires_problem("0 0 * 2 5#5") is None


def test_time_zones() -> None:
    assert timezone_problem("Europe/Paris") is None
    assert timezone_problem("Mars/Olympus") == (
        "unknown time zone 'Mars/Olympus' (use an IANA name such as "
        "Europe/Paris, America/New_York or UTC)"
    )
    assert timezone_problem("../etc/passwd") is not None


def test_cron_is_parsed_in_one_module() -> None:
    """validate, the scheduler, `blockyard schedules` and the server all ask engine/spec/cron.py: nothing else
    imports croniter, so what validates is what fires."""
    engine = Path(__file__).resolve().parents[1] / "engine"
    importers = set()
    for path in engine.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "croniter" for name in names):
                importers.add(str(path.relative_to(engine)))
    assert importers == {"spec/cron.py"}


def test_loading_the_cron_grammar_starts_no_process() -> None:
    """croniter's import asks platform.architecture(), which runs `file` on the interpreter: a process
    for every `blockyard validate` of a yard with a schedule. engine/spec/cron.py answers from the pointer
    size instead while croniter loads, and puts platform.architecture back."""
    probe = (
        "import platform, subprocess\n"
        "started = []\n"
        "init = subprocess.Popen.__init__\n"
        "def record(self, args, *rest, **options):\n"
        "    started.append(args)\n"
        "    init(self, args, *rest, **options)\n"
        "subprocess.Popen.__init__ = record\n"
        "asked = platform.architecture\n"
        "import engine.spec.cron\n"
        "assert 'croniter' in __import__('sys').modules\n"
        "assert platform.architecture is asked, 'platform.architecture was not put back'\n"
        "print(started)\n"
    )
    repo = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
