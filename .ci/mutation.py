"""Mutation testing of the modules that carry the product's guarantees, group by group (`bash .ci/mutation`).

Each group pairs a few modules with the tests that cover them, so a mutant runs only those tests (mutmut
narrows further, to the tests that called the mutated function) and a group takes minutes, not the whole
suite's time. A group runs in a copy of the checkout (build/mutation/work/GROUP: the files a clone would
have, as they are in the work tree), never in the checkout itself: mutmut rewrites every function of a
mutated module into a trampoline, and other people's tests must never import that.

The report goes to build/mutation/report/: <group>.md per group (score per module, each surviving mutant
with its diff, the list of mutants without a covering test), <group>.log (mutmut's own output), and
summary.md/summary.json over the groups run. The score is killed / (mutants - equivalent ones): a timeout
counts as killed (the mutant hangs the code, which a test noticed); a mutant no test reached counts as
surviving. Equivalent mutants — no test can tell them from the code, whatever it asserts — are listed
with a reason in .ci/mutation-equivalent.txt and left out. docs/testing.md says how to read a survivor.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "build" / "mutation"
EQUIVALENT_FILE = REPO / ".ci" / "mutation-equivalent.txt"
KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})


@dataclass(frozen=True)
class Group:
    name: str
    modules: tuple[str, ...]  # paths from the repository's root
    tests: tuple[str, ...]  # test files (or folders) that cover them, run in one process
    about: str
    # more of pytest's arguments for the group's tests (--deselect: a test that cannot run under mutmut)
    pytest_args: tuple[str, ...] = ()
    # what a mutant's process inherits ready-made: "collect" (the tests collected, so the engine imported) or
    # "none" (it imports them itself, after the mutant is chosen): for modules whose functions run at import
    warmup: str = "collect"
    # functions that run when their module is imported (they build what the tests then use): mutmut credits
    # them to the first test only, so their mutants are run against every test of the group
    import_time: tuple[str, ...] = ()


SEMANTIC_TESTS = (
    "tests/validate/test_examples.py",
    "tests/validate/test_reference_sites.py",
    "tests/validate/test_semantic_flows.py",
    "tests/validate/test_semantic_graph.py",
    "tests/validate/test_semantic_policy.py",
    "tests/validate/test_semantic_yard.py",
    "tests/validate/test_semantic_durability.py",
    "tests/validate/test_semantic_budgets.py",
    "tests/validate/test_semantic_unwritten_paths.py",
    "tests/validate/test_validate_compiler_rules.py",
    "tests/validate/test_semantic_mutants.py",
)

GROUPS: tuple[Group, ...] = (
    Group(
        "state-messages",
        ("engine/state/messages.py",),
        ("tests/state/test_messages_exactly_once.py", "tests/state/test_messages_pages.py"),
        "a finished turn stores exactly two messages, whatever runs it twice; pages of a thread",
    ),
    Group(
        "state-gates",
        ("engine/state/gates.py",),
        (
            "tests/approvals/test_gate_claim_guards.py",
            "tests/approvals/test_gate_store.py",
            "tests/approvals/test_decisions.py",
        ),
        "of the deciders of one gate exactly one wins; a decided gate refuses every other",
    ),
    Group(
        "state-journal",
        ("engine/state/journal.py", "engine/state/inline_steps.py"),
        ("tests/runtime/test_inline_durable.py", "tests/runtime/test_writer_inline.py"),
        "the inline steps a node finished are restored once, in order, on the run's next execution",
    ),
    Group(
        "state-liveness",
        ("engine/state/liveness.py",),
        ("tests/state/test_liveness.py", "tests/runtime/test_run_store.py"),
        "a run's lease: held while its execution lives, taken over once it lapsed, by exactly one",
    ),
    Group(
        "state-fencing",
        ("engine/state/fencing.py",),
        ("tests/state/test_fencing.py", "tests/state/test_fencing_rules.py"),
        "a replica whose lease was taken writes nothing more for the run",
    ),
    # the checks of `blockyard validate`, in three groups of about 2,300 mutants each (one week's job each)
    *(
        Group(
            name,
            tuple(f"engine/validate/semantic/{module}" for module in modules),
            SEMANTIC_TESTS,
            f"`blockyard validate` reports every {what}, at file:line:col",
        )
        for name, what, modules in (
            (
                "semantic-references",
                "broken reference, unreachable step and bad route",
                (
                    "references.py",
                    "index.py",
                    "graph.py",
                    "flows.py",
                    "structure.py",
                    "paths.py",
                    "routing.py",
                    "control.py",
                    "__init__.py",
                ),
            ),
            (
                "semantic-dataflow",
                "value read before it is written, and every wrong binding and template",
                (
                    "dataflow.py",
                    "bindings.py",
                    "scope.py",
                    "templates.py",
                    "facts.py",
                    "accumulate.py",
                    "emits.py",
                    "defaults.py",
                ),
            ),
            (
                "semantic-rules",
                "broken block, agent, delegation, policy, budget and configuration rule",
                (
                    "blocks.py",
                    "agents.py",
                    "delegation.py",
                    "policy.py",
                    "budgets.py",
                    "config.py",
                    "durations.py",
                    "durability.py",
                    "retention.py",
                    "schedule.py",
                ),
            ),
        )
    ),
    Group(
        "templates",
        ("engine/templates/limits.py", "engine/templates/sandbox.py", "engine/templates/checks.py"),
        (
            "tests/test_templates.py",
            "tests/test_template_guards.py",
            "tests/test_template_limits_nested.py",
            "tests/test_template_fast.py",
            "tests/validate/test_constant_limits.py",
            "tests/test_template_mutants.py",
        ),
        "a template cannot reach Python internals, run away, or make a value past the limits",
        # a million loop iterations: through mutmut's trampolines (each call recorded while it finds which
        # tests reach which function) they take longer than the tests allow
        (
            "--deselect",
            "tests/test_templates.py::test_nested_loops_run_out_of_iterations",
            "--deselect",
            "tests/test_templates.py::test_macros_calling_each_other_count_as_work",
        ),
        # engine/templates/render.py builds its environment at import: the filters' guards are wrapped then
        warmup="none",
        import_time=(
            "engine.templates.checks.x_guard_filter",
            "engine.templates.checks.x__check_count",
            "engine.templates.checks.x__check_as_text",
            "engine.templates.sandbox.xǁBoundedEnvironmentǁ__init__",
            "engine.templates.sandbox.xǁBoundedEnvironmentǁguard_filters",
        ),
    ),
    Group(
        "serve-guards",
        (
            "engine/serve/hosts.py",
            "engine/serve/auth.py",
            "engine/serve/bodies.py",
            "engine/serve/middleware.py",
        ),
        (
            "tests/serve/test_request_guards.py",
            "tests/serve/test_serve_auth.py",
            "tests/serve/test_serve_hostile.py",
            "tests/serve/test_serve_cors.py",
        ),
        "the server refuses a foreign Host, a missing or wrong token, a body past its limit",
        # the routes document their bodies when they are declared, at import (engine/serve/routes)
        warmup="none",
        import_time=("engine.serve.bodies.x_openapi_body",),
    ),
)


# Imported at the start of every Python child of a test (the mutants' folder is on its PYTHONPATH). While
# mutmut records which tests reach which function, a trampoline reports each call to mutmut's state, which
# a child cannot reach (it reads mutmut's configuration from its own working folder, and fails there): the
# child runs the code unrecorded. Against a mutant, a child runs the mutant, as the test's process does.
STATS_CHILD = """import os
if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    os.environ["MUTANT_UNDER_TEST"] = ""
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bash .ci/mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("groups", nargs="*", metavar="GROUP", help="groups to run (default: all)")
    parser.add_argument(
        "--list", action="store_true", help="name the groups, their modules and tests"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("BLOCKYARD_MUTATION_JOBS", "2")),
        help="mutants tested at once (default 2, or $BLOCKYARD_MUTATION_JOBS)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=0,
        metavar="N",
        help="test N mutants of each group drawn at random (seed --seed) instead of all",
    )
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="reuse the work folder: only mutants of changed functions run again",
    )
    parser.add_argument(
        "--fail-under",
        type=float,
        default=0.0,
        metavar="PERCENT",
        help="exit 1 when a group's score is below PERCENT (the weekly workflow: 85)",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="run nothing: write the report again from the groups' last run (after editing "
        ".ci/mutation-equivalent.txt)",
    )
    args = parser.parse_args(argv)
    by_name = {group.name: group for group in GROUPS}
    if args.list:
        for group in GROUPS:
            print(
                f"{group.name}: {group.about}\n  mutates: {' '.join(group.modules)}\n"
                f"  tests:   {' '.join([*group.tests, *group.pytest_args])}"
            )
        return 0
    unknown = [name for name in args.groups if name not in by_name]
    if unknown:
        print(
            f"mutation: no group {', '.join(unknown)}; groups: {', '.join(by_name)}",
            file=sys.stderr,
        )
        return 2
    missing = [
        path
        for group in GROUPS
        for path in (*group.modules, *group.tests)
        if not (REPO / path).exists()
    ]
    if missing:
        print(
            f"mutation: the group table names files that do not exist: {', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    equivalent = read_equivalent(EQUIVALENT_FILE)
    report_dir = BUILD / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.groups or list(by_name):
        if args.report:
            results.append(rereport(by_name[name], equivalent, report_dir))
            continue
        results.append(
            run_group(
                by_name[name],
                equivalent,
                report_dir,
                jobs=args.jobs,
                sample=args.sample,
                seed=args.seed,
                keep=args.keep,
            )
        )
    write_summary(report_dir, results)
    low = [
        f"{result['group']} {percent(result['score'])}"
        for result in results
        if result["score"] is not None and 100 * result["score"] < args.fail_under
    ]
    if low:
        print(f"mutation: below {args.fail_under:g}%: {', '.join(low)}", file=sys.stderr)
    return 0 if all(result["ok"] for result in results) and not low else 1


def read_equivalent(path: Path) -> dict[str, str]:
    """MUTANT_NAME -> why no test can kill it (one per line: the name, whitespace, the reason; # comments)."""
    listed: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            listed[name] = why.strip()
    return listed


def checkout_files() -> list[str]:
    """The files a clone would have (tracked, and new ones not ignored), as they are in the work tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


def prepare(group: Group, work: Path, keep: bool) -> None:
    """Copy the checkout into `work` and configure mutmut there for `group`."""
    if work.exists() and not keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    files = checkout_files()
    for name in files:
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    tops = sorted({name.split("/")[0] for name in files} - {"engine", "pyproject.toml"})
    config = {
        "source_paths": ["engine/"],
        "only_mutate": list(group.modules),
        "also_copy": tops,
        # one process (the suite's addopts start four xdist workers); mutmut forks one child per mutant
        "pytest_add_cli_args": [
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
        ],
        "pytest_add_cli_args_test_selection": [*group.tests, *group.pytest_args],
        "use_git_change_detection": False,
        # each mutant's process is forked from a server that only collected the tests, never ran one: a
        # process that ran tests holds their threads (the stateless tripwire's listener, the suite's fork
        # server), which a fork would not carry, and a mutant's tests would fail for that, not for the mutant
        "process_isolation": "forkserver",
        "forkserver_warmup": group.warmup,
        "timeout_multiplier": 10.0,
        "timeout_constant": 5.0,
        "debug": os.environ.get("BLOCKYARD_MUTATION_DEBUG", "")
        == "1",  # pytest's output of every run, in the log
    }
    pyproject = work / "pyproject.toml"
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pyproject.write_text(
        text
        + "\n[tool.mutmut]\n"
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in config.items()),
        encoding="utf-8",
    )


def reach_everything(work: Path, functions: tuple[str, ...]) -> None:
    """Credit `functions` with every test of the group in mutmut's record of which tests reach which function."""
    path = work / "mutants" / "mutmut-stats.json"
    if not functions or not path.exists():
        return
    stats = json.loads(path.read_text(encoding="utf-8"))
    every = sorted(stats["duration_by_test"])
    for name in functions:
        stats["tests_by_mangled_function_name"][name] = every
    path.write_text(json.dumps(stats, indent=4), encoding="utf-8")


def mutant_results(work: Path) -> dict[str, str]:
    """Every mutant of the group's last run -> its status (killed, survived, no tests, timeout, ...)."""
    from mutmut.stats import status_by_exit_code

    found: dict[str, str] = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        for name, code in data["exit_code_by_key"].items():
            found[name] = status_by_exit_code[code]
    return found


def module_of(mutant: str) -> str:
    """engine.state.gates.x_claim__mutmut_3 -> engine/state/gates.py (a method: xǁClassǁname__mutmut_N; a
    package's __init__.py drops out of the name: engine.validate.semantic.x_check__mutmut_1)."""
    head = mutant.split(".xǁ")[0] if ".xǁ" in mutant else mutant.rsplit(".x_", 1)[0]
    path = head.replace(".", "/")
    return f"{path}.py" if (REPO / f"{path}.py").exists() else f"{path}/__init__.py"


def diff_of(work: Path, mutant: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    here = Path.cwd()
    os.chdir(work)
    try:
        return str(get_diff_for_mutant(mutant, path=module_of(mutant)))
    except Exception as error:  # a report must not stop at one diff it cannot show
        return f"(no diff: {error})"
    finally:
        os.chdir(here)


def run_group(
    group: Group,
    equivalent: dict[str, str],
    report_dir: Path,
    *,
    jobs: int,
    sample: int,
    seed: int,
    keep: bool,
) -> dict[str, Any]:
    work = BUILD / "work" / group.name
    started = time.monotonic()
    print(f"== {group.name}: {' '.join(group.modules)}", flush=True)
    prepare(group, work, keep)
    env = dict(os.environ)
    # a test's child process (`python -m engine ...`) imports the mutated engine too, and each child is a new
    # interpreter that reads the mutant's name from its environment (the suite's fork server, started once,
    # would keep the name it started with)
    env["PYTHONPATH"] = str(work / "mutants")
    # made now, not by mutmut: Python remembers a folder of sys.path that was missing when it started as one
    # to skip, so the mutants (imported through the same entry, which mutmut puts first) would be passed by
    (work / "mutants").mkdir(exist_ok=True)
    (work / "mutants" / "sitecustomize.py").write_text(STATS_CHILD, encoding="utf-8")
    env["BLOCKYARD_TEST_FORKSERVER"] = "0"
    env.pop("PYTEST_ADDOPTS", None)
    mutmut = [str(REPO / ".venv" / "bin" / "mutmut"), "run", "--max-children", str(jobs)]
    log_path = report_dir / f"{group.name}.log"
    names: list[str] = []
    with log_path.open("w", encoding="utf-8") as log:
        # mutants are made (and every test's reach recorded) by a run that tests none of them (mutmut stops it
        # there: no mutant has that name)
        recorded = False
        for _ in range(
            2
        ):  # a test that failed while the reach was recorded (a loaded machine): once more
            subprocess.run(
                [*mutmut, "__none__"], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT
            )
            recorded = (work / "mutants" / "mutmut-stats.json").exists()
            if recorded:
                break
        if not recorded and group.import_time:
            # the run below records the reach itself, crediting the functions that run at import to one test:
            # their mutants would survive for that, and the score would be wrong
            print(
                f"mutation: {group.name}: the tests failed while mutmut recorded which tests reach which "
                f"function (see {log_path}); this run's score is not trusted",
                file=sys.stderr,
            )
        reach_everything(work, group.import_time)
        if sample:
            every = sorted(mutant_results(work))
            names = sorted(random.Random(seed).sample(every, min(sample, len(every))))
        status = subprocess.run(
            [*mutmut, *names], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    tidy_log(log_path)
    results = mutant_results(work)
    if names:
        results = {name: results[name] for name in names}
    ok = status == 0 and bool(results) and (recorded or not group.import_time)
    return report(
        group,
        work,
        results,
        equivalent,
        report_dir,
        ok=ok,
        seconds=time.monotonic() - started,
        sampled=len(names),
    )


def rereport(group: Group, equivalent: dict[str, str], report_dir: Path) -> dict[str, Any]:
    """The report of the group's last run again (the equivalent mutants may have changed since)."""
    work = BUILD / "work" / group.name
    results = mutant_results(work)
    kept = (
        json.loads((report_dir / "summary.json").read_text(encoding="utf-8")).get(group.name, {})
        if (report_dir / "summary.json").exists()
        else {}
    )
    sampled = int(kept.get("sampled", 0))
    if sampled:
        results = {name: results[name] for name in kept.get("tested", []) if name in results}
    return report(
        group,
        work,
        results,
        equivalent,
        report_dir,
        ok=bool(results) and kept.get("ok", True),
        seconds=float(kept.get("seconds", 0)),
        sampled=sampled,
    )


def tidy_log(path: Path) -> None:
    """mutmut redraws a spinner and its progress line with carriage returns: keep the last of each run."""
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = [part for part in line.split("\r") if part.strip()]
        if parts:
            lines.append(parts[-1])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# SQL's keywords and unquoted names mean the same in any case, on SQLite and on Postgres (which folds them
# to lower case); engine/state/postgres.py rewrites SQLite's words case-blind too, except these few
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SQL_WORD = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|FROM|VALUES|ORDER BY|GROUP BY|LIMIT|AND|OR|SET|JOIN|"
    r"NULL)\b",
    re.IGNORECASE,
)
_SQL_START = re.compile(r"^\s*" + _SQL_WORD.pattern, re.IGNORECASE)
_SQL_PARAMETER = re.compile(r"\w \S{1,2} \?")  # `column = ?`, `idx < ?`
_SQL_CASE_SENSITIVE = re.compile(r"\bIS \?|WITHOUT ROWID|\bREAL\b|\bBLOB\b", re.IGNORECASE)
SQL_CASE = "changes only the letter case of SQL text (the same statement to SQLite and Postgres)"


def _sql(text: str) -> bool:
    """A string literal that is (part of) an SQL statement: SQL words, and a `?` placeholder or a clause first."""
    sql_like = bool(_SQL_WORD.search(text) or _SQL_PARAMETER.search(text))
    return (
        sql_like
        and ("?" in text or bool(_SQL_START.match(text)))
        and not _SQL_CASE_SENSITIVE.search(text)
    )


def equivalent_by_rule(diff: str) -> str | None:
    """Why a mutant is equivalent by a rule that covers a whole kind of them, or None: today one rule, a
    change of letter case inside string literals that are SQL, the code around them untouched."""
    lines = [line for line in diff.splitlines() if not line.startswith(("---", "+++"))]
    removed = [line[1:] for line in lines if line.startswith("-")]
    added = [line[1:] for line in lines if line.startswith("+")]
    if not removed or len(removed) != len(added) or removed == added:
        return None
    for before, after in zip(removed, added, strict=True):
        if _LITERAL.sub('""', before) != _LITERAL.sub('""', after):
            return None  # the code changed, not only text
        for old, new in zip(_LITERAL.findall(before), _LITERAL.findall(after), strict=True):
            if old != new and (old.lower() != new.lower() or not _sql(old)):
                return None
    return SQL_CASE


def report(
    group: Group,
    work: Path,
    results: dict[str, str],
    equivalent: dict[str, str],
    report_dir: Path,
    *,
    ok: bool,
    seconds: float,
    sampled: int,
) -> dict[str, Any]:
    modules: dict[str, Counter[str]] = {module: Counter() for module in group.modules}
    survivors: list[str] = []
    untested: list[str] = []
    by_rule: dict[str, str] = {}
    for name, status in sorted(results.items()):
        counts = modules.setdefault(module_of(name), Counter())
        rule = equivalent_by_rule(diff_of(work, name)) if status not in KILLED else None
        if name in equivalent or rule:
            counts["equivalent"] += 1
            if rule:
                by_rule[name] = rule
            continue
        counts["mutants"] += 1
        counts[status] += 1
        if status in KILLED:
            counts["dead"] += 1
        elif status == "no tests":
            untested.append(name)
        elif status != "not checked":
            survivors.append(name)
    scores = {module: score(counts) for module, counts in modules.items()}
    lines = [
        f"# Mutation report: {group.name}",
        "",
        group.about,
        "",
        f"Tests: {', '.join(group.tests)}",
        f"Time: {seconds:.0f} s" + (f"; a sample of {sampled} mutants" if sampled else ""),
        "",
        "| module | mutants | killed | survived | no test reached | equivalent | score |",
        "|---|---|---|---|---|---|---|",
    ]
    for module, counts in modules.items():
        lines.append(
            f"| {module} | {counts['mutants']} | {counts['dead']} | {counts['survived']} | "
            f"{counts['no tests']} | {counts['equivalent']} | {percent(scores[module])} |"
        )
    total = sum(modules.values(), Counter())
    lines += [
        f"| **all** | {total['mutants']} | {total['dead']} | {total['survived']} | {total['no tests']} | "
        f"{total['equivalent']} | {percent(score(total))} |",
        "",
    ]
    if not ok:
        lines += [f"**The run did not finish cleanly**: see {group.name}.log.", ""]
    lines += ["## Surviving mutants", ""]
    for name in survivors:
        lines += [f"### {name} ({results[name]})", "", "```diff", diff_of(work, name), "```", ""]
    if not survivors:
        lines += ["None.", ""]
    lines += [
        "## Equivalent mutants",
        "",
        "Listed in .ci/mutation-equivalent.txt, or equivalent by a rule:",
        "",
    ]
    lines += [
        f"- {name}: {equivalent.get(name) or by_rule.get(name)}"
        for name in sorted(results)
        if name in equivalent or name in by_rule
    ] or ["None."]
    lines += ["", "## Mutants no test reached", ""]
    for name in untested:
        lines += [f"### {name}", "", "```diff", diff_of(work, name), "```", ""]
    if not untested:
        lines += ["None.", ""]
    (report_dir / f"{group.name}.md").write_text("\n".join(lines), encoding="utf-8")
    print(
        f"   {percent(score(total))} of {total['mutants']} mutants killed ({len(survivors)} survived, "
        f"{len(untested)} reached by no test, {total['equivalent']} equivalent) in {seconds:.0f} s: "
        f"{report_dir / (group.name + '.md')}",
        flush=True,
    )
    return {
        "group": group.name,
        "ok": ok,
        "seconds": round(seconds),
        "sampled": sampled,
        "score": score(total),
        "tested": sorted(results) if sampled else [],
        "modules": {
            module: {**counts, "score": scores[module]} for module, counts in modules.items()
        },
        "survivors": survivors,
        "untested": untested,
    }


def score(counts: Counter[str]) -> float | None:
    return counts["dead"] / counts["mutants"] if counts["mutants"] else None


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def write_summary(report_dir: Path, results: list[dict[str, Any]]) -> None:
    """summary.json and summary.md: the groups of this run, merged with those of earlier runs kept there."""
    path = report_dir / "summary.json"
    kept = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    kept.update({result["group"]: result for result in results})
    path.write_text(json.dumps(kept, indent=2), encoding="utf-8")
    lines = [
        "# Mutation scores",
        "",
        "| group | module | mutants | killed | score |",
        "|---|---|---|---|---|",
    ]
    for name, result in kept.items():
        for module, counts in result["modules"].items():
            sampled = f" (sample of {result['sampled']})" if result["sampled"] else ""
            lines.append(
                f"| {name}{sampled} | {module} | {counts.get('mutants', 0)} | {counts.get('dead', 0)} | "
                f"{percent(counts['score'])} |"
            )
    (report_dir / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
