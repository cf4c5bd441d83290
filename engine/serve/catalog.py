"""What the server serves: the newest good version of every flow, and what is wrong right now.

A reload builds a new `Catalog` from the files and the previous catalog. A flow is swapped in
only when nothing it depends on is broken (its closure, engine/definitions/closure.py: its own file, the
blocks, subflows and delegated flows it reaches, blockyard.yaml); otherwise its last good
version keeps serving and the problems are listed against it. Catalogs are immutable, so
replacing the server's reference is the atomic swap: a request sees either the old catalog or
the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from engine.core.diagnostics import Diagnostic
from engine.core.errors import BlockyardError
from engine.definitions.closure import broken_block_names, closure, errors_by_file, problems_of
from engine.definitions.files import Bounds
from engine.definitions.pinned import Bundle, make_bundle
from engine.definitions.project import CONFIG_FILE, FlowDef, Project, load_project
from engine.definitions.prompts import PromptFileError, read_prompt
from engine.spec.config import RetentionSpec, ServerSpec
from engine.validate.codes import SERVE
from engine.validate.semantic import check_project

# Codes of the problems only the server looks for (BY6xx is the server's range). Schedules are not
# among them: `validate` checks them with the scheduler's own grammar (engine/spec/cron.py), so the
# server reports what `validate` reports (BY507, BY508, BY510).
COMPILE_ERROR = (
    "BY602"  # a flow that validates but does not compile here (e.g. a smart block without DSPy)
)
BUNDLE_ERROR = "BY690"  # a flow that passed the checks but could not be pinned (should not happen)
CODES = SERVE

Compiler = Callable[[Bundle], object]


def compile_check(bundle: Bundle) -> object:
    """Compile a bundle once when it is swapped in, so what can't run is held back like any error."""
    # LangGraph: not for `blockyard schedules`, which reads the catalog
    from engine.compile import compile_flow

    return compile_flow(bundle)


@dataclass(frozen=True)
class FlowEntry:
    """One served flow version, pinned as a bundle."""

    name: str
    bundle: Bundle
    file: str
    loaded_at: float

    @property
    def digest(self) -> str:
        return self.bundle.digest

    @property
    def version(self) -> int:
        return self.bundle.version

    @property
    def description(self) -> str | None:
        return self.bundle.flow.description


@dataclass(frozen=True)
class Catalog:
    """An immutable snapshot: served flows, their problems, and every diagnostic of the yard."""

    flows: Mapping[str, FlowEntry] = field(default_factory=lambda: MappingProxyType({}))
    diagnostics: tuple[Diagnostic, ...] = ()
    stale: Mapping[str, tuple[Diagnostic, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    generation: int = 0
    loaded_at: float = 0.0
    max_concurrent_runs: int = 32
    # blockyard.yaml's `server` section: the request limits and allowed hosts read on every request
    server: ServerSpec = field(default_factory=ServerSpec)
    # blockyard.yaml's `retention`: what the daily gc deletes (engine/serve/chores.py)
    retention: RetentionSpec = field(default_factory=RetentionSpec)
    # the prompt files the flows are made of (engine/definitions/closure.py), with a hash of each as read before the
    # flows pinned them: the watcher watches them, and an edit made meanwhile is noticed
    prompts: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    def flow(self, name: str) -> FlowEntry | None:
        return self.flows.get(name)


def load_catalog(
    root: Path, previous: Catalog | None = None, compiler: Compiler | None = compile_check
) -> Catalog:
    """Read the yard and build the next catalog (blocking: run it in a worker thread)."""
    project = load_project(root)
    prompts = prompt_hashes(
        project.root, {name for flow in project.flows for name in closure(project, flow).prompts}
    )
    diagnostics = list(project.diagnostics)
    if not _config_broken(diagnostics):
        diagnostics.extend(check_project(project))
    return replace(
        build_catalog(project, diagnostics, previous or Catalog(), compiler), prompts=prompts
    )


def prompt_hashes(root: Path, names: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(name, hash of its content) of prompt files of the yard, read as a run reads them
    (engine/definitions/prompts.py); a file that cannot be read has the reason instead."""
    bounds = Bounds.of(root)
    found = []
    for name in sorted(names):
        try:
            text = read_prompt(root, bounds, name)
        except PromptFileError as exc:
            found.append((name, f"unreadable: {exc}"))
        else:
            found.append(
                (name, hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest())
            )
    return tuple(found)


def build_catalog(
    project: Project,
    diagnostics: list[Diagnostic],
    previous: Catalog,
    compiler: Compiler | None = None,
) -> Catalog:
    """Swap in every flow whose definition is clean; keep the last good version of the others."""
    errors = errors_by_file(diagnostics)
    config_broken = CONFIG_FILE in errors
    broken_blocks = broken_block_names(project, errors)
    now = time.time()
    flows: dict[str, FlowEntry] = {}
    stale: dict[str, tuple[Diagnostic, ...]] = {}
    extra: list[Diagnostic] = []
    for name, definition in sorted(project.flows.items()):
        problems = problems_of(project, name, errors, broken_blocks)
        if not problems:
            try:
                bundle = make_bundle(project, name)
            except BlockyardError as exc:
                problems = [definition.doc.diag(("flow",), BUNDLE_ERROR, str(exc))]
                extra.extend(problems)
            else:
                old = previous.flows.get(name)
                if old is not None and old.digest == bundle.digest:
                    flows[name] = old
                    continue
                problem = _compile_problem(compiler, bundle, definition)
                if problem is None:
                    flows[name] = FlowEntry(name, bundle, definition.display, now)
                    continue
                problems = [problem]
                extra.append(problem)
        _keep_last_good(previous, name, problems, flows, stale)
    # A flow whose file no longer loads is absent from the project: find it by the file it came from.
    for name, old in previous.flows.items():
        if name in flows or name in stale:
            continue
        problems = errors.get(old.file, [])
        if problems and (project.root / old.file).is_file():
            _keep_last_good(previous, name, problems, flows, stale)
    return Catalog(
        flows=MappingProxyType(dict(sorted(flows.items()))),
        diagnostics=tuple(sorted({*diagnostics, *extra})),
        stale=MappingProxyType(stale),
        generation=previous.generation + 1,
        loaded_at=now,
        max_concurrent_runs=project.config.server.max_concurrent_runs,
        # a broken blockyard.yaml keeps the last good limits (a proxy's allowed host must not vanish on a typo)
        server=previous.server if config_broken and previous.generation else project.config.server,
        # nor may a typo in it change what the daily gc deletes: the last good policy stays, or none at all
        retention=previous.retention if config_broken else project.config.retention,
    )


def _compile_problem(
    compiler: Compiler | None, bundle: Bundle, definition: FlowDef
) -> Diagnostic | None:
    if compiler is None:
        return None
    try:
        compiler(bundle)
    except BlockyardError as exc:
        return definition.doc.diag(
            ("flow",), COMPILE_ERROR, f"flow '{bundle.name}' does not compile: {exc}"
        )
    except Exception as exc:  # a compiler bug holds back this flow, not the whole server
        return definition.doc.diag(
            ("flow",),
            COMPILE_ERROR,
            f"flow '{bundle.name}' does not compile (internal error): {type(exc).__name__}: {exc}",
        )
    return None


def _keep_last_good(
    previous: Catalog,
    name: str,
    problems: Iterable[Diagnostic],
    flows: dict[str, FlowEntry],
    stale: dict[str, tuple[Diagnostic, ...]],
) -> None:
    stale[name] = tuple(sorted(set(problems)))
    old = previous.flows.get(name)
    if old is not None:
        flows[name] = old


def _config_broken(diagnostics: list[Diagnostic]) -> bool:
    return any(d.file == CONFIG_FILE and d.severity == "error" for d in diagnostics)
