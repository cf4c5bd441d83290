"""What the server serves: the newest good version of every flow, and what is wrong right now.

A reload builds a new `Catalog` from the files and the previous catalog. A flow is swapped in
only when nothing it depends on is broken (its own file, the files of the blocks and subflows
it uses, blockyard.yaml); otherwise its last good version keeps serving and the problems are
listed against it. Catalogs are immutable, so replacing the server's reference is the atomic
swap: a request sees either the old catalog or the new one, never a mix.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from engine.bundle import Bundle, make_bundle
from engine.diagnostics import Diagnostic
from engine.errors import BlockyardError
from engine.load import MAX_FILE_BYTES, LoadError, load_file
from engine.project import CONFIG_FILE, FlowDef, Project, load_project
from engine.spec import StepSpec
from engine.spec.config import ServerSpec
from engine.validate.codes import SERVE
from engine.yardfiles import Bounds, Refused, TooLarge, located, read_bytes

# Codes of the problems only the server looks for (BY6xx is the server's range). Schedules are not
# among them: `validate` checks them with the scheduler's own grammar (engine/cron.py), so the
# server reports what `validate` reports (BY507, BY508, BY510).
COMPILE_ERROR = "BY602"  # a flow that validates but does not compile (e.g. a construct not supported yet)
BUNDLE_ERROR = "BY690"  # a flow that passed the checks but could not be pinned (should not happen)
CODES = SERVE

Compiler = Callable[[Bundle], object]


def compile_check(bundle: Bundle) -> object:
    """Compile a bundle once when it is swapped in, so what can't run is held back like any error."""
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
    stale: Mapping[str, tuple[Diagnostic, ...]] = field(default_factory=lambda: MappingProxyType({}))
    generation: int = 0
    loaded_at: float = 0.0
    max_concurrent_runs: int = 32
    # blockyard.yaml's `server` section: the request limits and allowed hosts read on every request
    server: ServerSpec = field(default_factory=ServerSpec)

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    def flow(self, name: str) -> FlowEntry | None:
        return self.flows.get(name)


def load_catalog(root: Path, previous: Catalog | None = None, compiler: Compiler | None = compile_check) -> Catalog:
    """Read the yard and build the next catalog (blocking: run it in a worker thread)."""
    from engine.validate.semantic import check_project

    project = load_project(root)
    diagnostics = list(project.diagnostics)
    if not _config_broken(diagnostics):
        diagnostics.extend(check_project(project))
    return build_catalog(project, diagnostics, previous or Catalog(), compiler)


def build_catalog(project: Project, diagnostics: list[Diagnostic], previous: Catalog,
                  compiler: Compiler | None = None) -> Catalog:
    """Swap in every flow whose definition is clean; keep the last good version of the others."""
    errors = _errors_by_file(diagnostics)
    broken_blocks = _broken_block_names(project, errors)
    config_broken = CONFIG_FILE in errors
    now = time.time()
    flows: dict[str, FlowEntry] = {}
    stale: dict[str, tuple[Diagnostic, ...]] = {}
    extra: list[Diagnostic] = []
    for name, definition in sorted(project.flows.items()):
        files = _dependencies(project, name, set())
        problems = [d for f in sorted(files | ({CONFIG_FILE} if config_broken else set())) for d in errors.get(f, [])]
        problems += [d for ref, ds in broken_blocks.items() if _uses_block(project, name, ref) for d in ds]
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
    )


def _compile_problem(compiler: Compiler | None, bundle: Bundle, definition: FlowDef) -> Diagnostic | None:
    if compiler is None:
        return None
    try:
        compiler(bundle)
    except BlockyardError as exc:
        return definition.doc.diag(("flow",), COMPILE_ERROR, f"flow '{bundle.name}' does not compile: {exc}")
    except Exception as exc:  # a compiler bug holds back this flow, not the whole server
        return definition.doc.diag(("flow",), COMPILE_ERROR, f"flow '{bundle.name}' does not compile "
                                                             f"(internal error): {type(exc).__name__}: {exc}")
    return None


def _keep_last_good(previous: Catalog, name: str, problems: Iterable[Diagnostic],
                    flows: dict[str, FlowEntry], stale: dict[str, tuple[Diagnostic, ...]]) -> None:
    stale[name] = tuple(sorted(set(problems)))
    old = previous.flows.get(name)
    if old is not None:
        flows[name] = old


def _config_broken(diagnostics: list[Diagnostic]) -> bool:
    return any(d.file == CONFIG_FILE and d.severity == "error" for d in diagnostics)


def _errors_by_file(diagnostics: Iterable[Diagnostic]) -> dict[str, list[Diagnostic]]:
    table: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.severity == "error":
            table.setdefault(diagnostic.file, []).append(diagnostic)
    return table


def _dependencies(project: Project, name: str, seen: set[str]) -> set[str]:
    """Display paths of the files flow `name` is made of (its blocks and subflows included)."""
    definition = project.flow(name)
    if definition is None or name in seen:
        return set()
    seen.add(name)
    files = {definition.display}
    for step, _ in definition.spec.walk():
        for ref in _block_refs(step):
            block = project.block(ref)
            if block is not None:
                files.add(block.display)
        if step.flow:
            files |= _dependencies(project, step.flow, seen)
    return files


def _block_refs(step: StepSpec) -> list[str]:
    refs = [step.uses, step.map.uses if step.map is not None else None]
    return [ref for ref in refs if ref]


def _uses_block(project: Project, name: str, block_name: str, seen: set[str] | None = None) -> bool:
    seen = seen if seen is not None else set()
    definition = project.flow(name)
    if definition is None or name in seen:
        return False
    seen.add(name)
    for step, _ in definition.spec.walk():
        if any(ref.partition("@")[0] == block_name for ref in _block_refs(step)):
            return True
        if step.flow and _uses_block(project, step.flow, block_name, seen):
            return True
    return False


def _broken_block_names(project: Project, errors: Mapping[str, list[Diagnostic]]) -> dict[str, list[Diagnostic]]:
    """Block names whose file is broken: a flow using such a name must not silently fall back
    to another version of the block. The names are the file's `block:` value (read from the
    raw text when the YAML no longer parses) and the file name (blocks/<id>.yaml by convention)."""
    folder = (project.root / project.config.paths.blocks).resolve()
    names: dict[str, list[Diagnostic]] = {}
    bounds = project.bounds()
    for display, problems in errors.items():
        path = project.root / display
        try:  # by its own name: a link refused for leading out of the yard still breaks its block
            located(path).relative_to(folder)
        except ValueError:
            continue
        candidates = {path.stem, *_declared_block(path, display, bounds)}
        for candidate in candidates:
            names.setdefault(candidate, []).extend(problems)
    return names


_BLOCK_LINE = re.compile(r"^block:\s*[\"']?([A-Za-z_][A-Za-z0-9_-]*)", re.M)


def _declared_block(path: Path, display: str, bounds: Bounds) -> set[str]:
    try:
        data = load_file(path, display, bounds=bounds).data
    except (LoadError, OSError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("block"), str):
        return {data["block"]}
    try:  # read like the loader: never a link out of the yard, a FIFO or more than the limit
        text = read_bytes(path, MAX_FILE_BYTES, bounds).decode("utf-8", errors="replace")
    except (Refused, TooLarge, OSError):
        return set()
    return set(_BLOCK_LINE.findall(text))
