"""`blockyard eval`: read the eval files, pin what each runs on each side, run the cases, compare,
keep the results, and hand the outcome to the reports (docs/evals.md).

The eval files are the working tree's and must validate (their problems stop the command, as
`blockyard validate` reports them). Without `--base` every chosen eval runs on the working tree. With
`--base REV` the yard at REV is read as `blockyard diff` reads it; an eval whose flow (or block) pins to
the same digest on both sides is not run (`--all` runs it anyway), the others run on both sides, the
same cases, one pool of `jobs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError, ValidationFailed
from engine.definitions.project import Project, load_project
from engine.evals import history
from engine.evals.cache import DEFAULT_FOLDER, ENV, FolderCache
from engine.evals.compare import compare
from engine.evals.outcome import Outcome
from engine.evals.progress import Progress
from engine.evals.results import DEFAULT_THRESHOLDS, CaseResult, EvalResult
from engine.evals.runner import Job, Runner, scratch_engine
from engine.evals.targets import BASE, HEAD, Side
from engine.models.resolver import ModelResolver
from engine.review.revisions import commit_of, in_git, sides
from engine.review.versions import load_side
from engine.state.checkpointer import StateDB
from engine.state.database import DB_ERRORS, StateError
from engine.state.location import of_yard
from engine.validate.evalchecks import check_evals
from engine.validate.evalfiles import EvalDef, EvalFiles, load_evals

WORKING_TREE = "working tree"


@dataclass
class Options:
    names: list[str] = field(default_factory=list)
    base: str | None = None
    everything: bool = False  # --all: also the evals whose flow did not change
    jobs: int = 4
    cache: bool = True
    cache_dir: Path | None = None
    tolerance: float = 0.0
    fail_on_regression: bool = False
    record: bool = True  # keep the results in the yard's state database


def load_head(root: Path) -> tuple[Project, EvalFiles]:
    """The working tree's yard and eval files; ValidationFailed with the eval files' errors."""
    project = load_project(root)
    files = load_evals(project)
    errors = [
        d
        for d in sorted({*files.diagnostics, *check_evals(project, files)})
        if d.severity == "error"
    ]
    if errors:
        raise ValidationFailed(errors)
    return project, files


def chosen(files: EvalFiles, names: list[str]) -> list[EvalDef]:
    if not names:
        return list(files.evals.values())
    unknown = [name for name in names if name not in files.evals]
    if unknown:
        known = ", ".join(sorted(files.evals)) or "none (evals/*.yaml)"
        raise UsageError(
            f"unknown eval '{unknown[0]}'{did_you_mean(unknown[0], files.evals)}; the evals: {known}"
        )
    return [files.evals[name] for name in dict.fromkeys(names)]


def cache_folder(root: Path, given: Path | None) -> Path:
    """--cache-dir, else $BLOCKYARD_EVAL_CACHE, else .blockyard/cache/models in the yard."""
    if given is not None:
        return given.resolve()
    from_env = os.environ.get(ENV, "").strip()
    return Path(from_env).resolve() if from_env else root / DEFAULT_FOLDER


def evaluate(root: Path, options: Options, err: TextIO | None = None) -> Outcome:
    """Run the chosen evals and return what they found (the results are kept in the state database)."""
    began = time.perf_counter()
    project, files = load_head(root)
    definitions = chosen(files, options.names)
    if not definitions:
        raise UsageError("no evals to run: add eval files to evals/ (docs/evals.md)")
    note = ModelResolver(project.config).default_note
    if note is not None:  # as `blockyard run` says it: the default profile is the offline mock
        (err or sys.stderr).write(f"note: {note}\n")
    folder = cache_folder(root, options.cache_dir)
    cache = FolderCache(folder) if options.cache else None
    head = Side(HEAD, WORKING_TREE, project, commit_of(root, "HEAD") if in_git(root) else None)
    with contextlib.ExitStack() as stack:
        base: Side | None = None
        if options.base is not None:
            old, _ = stack.enter_context(sides(root, options.base, None))
            base = Side(BASE, old.label, load_side(old), old.revision)
        outcome = Outcome(
            [],
            WORKING_TREE,
            base.label if base is not None else None,
            cache=cache.stats if cache else None,
            cache_folder=_shown(folder, root),
            tolerance=options.tolerance,
            fail_on_regression=options.fail_on_regression,
        )
        jobs, pairs = _plan(definitions, head, base, options.everything, outcome)
        _run(project, jobs, options, cache, err or sys.stderr)
    for head_result, base_result in pairs:
        if base is not None:
            outcome.comparisons.append(compare(head_result, base_result))
    outcome.seconds = time.perf_counter() - began
    if options.record:
        _record(project, outcome.results, err or sys.stderr)
    return outcome


def _plan(
    definitions: list[EvalDef], head: Side, base: Side | None, everything: bool, outcome: Outcome
) -> tuple[list[Job], list[tuple[EvalResult, EvalResult | None]]]:
    """The jobs to run, and each eval's result on the head (and the base) that they fill."""
    jobs: list[Job] = []
    pairs: list[tuple[EvalResult, EvalResult | None]] = []
    for definition in definitions:
        spec = definition.spec
        mine = head.target(spec)
        theirs = base.target(spec) if base is not None else None
        if (
            theirs is not None
            and not everything
            and theirs.digest is not None
            and theirs.digest == mine.digest
        ):
            outcome.unchanged.append((spec.name, spec.target))
            continue
        head_result = _result(definition, head, mine.digest, mine.problem)
        outcome.head.append(head_result)
        base_result = None
        if base is not None and theirs is not None:
            base_result = _result(definition, base, theirs.digest, theirs.problem)
            if theirs.bundle is not None:
                jobs.extend(Job(definition, theirs, case, base_result) for case in definition.cases)
        if mine.bundle is not None:
            jobs.extend(Job(definition, mine, case, head_result) for case in definition.cases)
        pairs.append((head_result, base_result))
    return jobs, pairs


def _result(definition: EvalDef, side: Side, digest: str | None, problem: str | None) -> EvalResult:
    spec = definition.spec
    target = side.target(spec)
    version = target.bundle.version if target.bundle is not None else None
    return EvalResult(
        spec.name,
        spec.target,
        definition.display,
        side.name,
        side.label,
        side.revision,
        digest,
        version,
        spec.thresholds or DEFAULT_THRESHOLDS,
        problem=problem,
    )


def _run(
    project: Project, jobs: list[Job], options: Options, cache: FolderCache | None, err: TextIO
) -> None:
    if not jobs:
        return
    counts: dict[str, int] = {}
    for job in jobs:
        counts[_key(job)] = counts.get(_key(job), 0) + 1
    progress = Progress(err, len(jobs), per_eval=counts)

    def on_case(job: Job, result: CaseResult) -> None:
        progress.case(_key(job), result)

    with tempfile.TemporaryDirectory(prefix="blockyard-eval-") as scratch:
        engine = scratch_engine(project, Path(scratch))
        try:
            runner = Runner(
                engine,
                ModelResolver(project.config),
                jobs=options.jobs,
                cache=cache,
                on_case=on_case,
            )
            progress.start()
            try:
                asyncio.run(runner.run(jobs))
            finally:
                progress.finish()
        finally:
            engine.close()


def _key(job: Job) -> str:
    return f"eval {job.definition.name}" + (" (base)" if job.into.side == BASE else "")


def _record(project: Project, results: list[EvalResult], err: TextIO) -> None:
    """Keep the results in the yard's state database; one that cannot be used costs only the history."""
    location = of_yard(project.root, project.config.paths.state, project.config.database)
    try:
        db = StateDB(location)
        try:
            history.record(db, results)
        finally:
            db.close()
    except (StateError, *DB_ERRORS) as exc:  # type: ignore[misc]  # DB_ERRORS: a tuple of exception classes
        err.write(
            f"warning: the results were not kept in the state database {location.shown}: {exc}\n"
        )


def _shown(folder: Path, root: Path) -> str:
    try:
        return folder.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(folder)
