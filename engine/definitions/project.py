"""A yard on disk: find its files, load and schema-check them, build the typed specs.

This is the shared front half of `validate`, `run` and `serve`. It imports no LangGraph.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from engine.core.diagnostics import Diagnostic
from engine.core.errors import UsageError
from engine.core.gcpause import collector_paused
from engine.definitions import schema
from engine.definitions.files import Bounds, Locations, list_files
from engine.definitions.load import Document, LoadError, load_file
from engine.spec import BlockSpec, ConfigSpec, FlowSpec
from engine.spec.block import parse_block

CONFIG_FILE = "blockyard.yaml"
YAML_SUFFIXES = (".yaml", ".yml")
# built-in blocks, e.g. query_memory (a yard's own file wins)
LIBRARY = Path(__file__).parents[1] / "library"
S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True)
class Definition(Generic[S]):
    """A spec together with the document it came from (for positions) and its content hash."""

    spec: S
    doc: Document

    @property
    def display(self) -> str:
        return self.doc.display

    @property
    def digest(self) -> str:
        return content_hash(self.doc.data)


BlockDef = Definition[BlockSpec]
FlowDef = Definition[FlowSpec]


def content_hash(data: Any) -> str:
    canonical = json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@dataclass
class Project:
    """Everything that loaded, plus every problem found on the way."""

    root: Path
    config: ConfigSpec = field(default_factory=ConfigSpec)
    config_doc: Document | None = None
    blocks: dict[str, dict[int, BlockDef]] = field(default_factory=dict)
    flows: dict[str, FlowDef] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def block(self, ref: str) -> BlockDef | None:
        """`name` -> the newest version, `name@2` -> exactly version 2."""
        name, _, version = ref.partition("@")
        versions = self.blocks.get(name)
        if not versions:
            return None
        if not version:
            return versions[max(versions)]
        # ASCII digits only ('²'.isdigit() is true), and few enough for int() (at most 4300 digits)
        if not (version.isascii() and version.isdigit() and len(version) <= 12):
            return None
        return versions.get(int(version))

    def flow(self, name: str) -> FlowDef | None:
        return self.flows.get(name)

    def bounds(self) -> Bounds:
        """Where the yard's files may resolve to: the root, and folders blockyard.yaml places outside it."""
        return Bounds.of(self.root, self.config.paths.blocks, self.config.paths.flows)

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)


def is_yard(root: Path) -> bool:
    """A yard has a blockyard.yaml, a flows/ or a blocks/ folder (the default paths: without a
    blockyard.yaml there is no other place for them)."""
    return (root / CONFIG_FILE).is_file() or (root / "flows").is_dir() or (root / "blocks").is_dir()


def require_yard(root: Path) -> Path:
    """`root`, resolved, when it is a yard; otherwise a UsageError saying so (not "unknown flow")."""
    root = root.resolve()
    if not is_yard(root):
        raise UsageError(
            f"no yard here ({root}): no {CONFIG_FILE}, flows/ or blocks/ — run in a yard or pass --root"
        )
    return root


def relative(path: Path, root: Path) -> str:
    """`path` as shown to the user: relative to the yard when inside it. A link is shown by its own
    name, never by its target's (which may lie outside the yard and be sensitive itself)."""
    return Names(root)(path)


class Names:
    """`relative` for the files of one load of a yard, each folder resolved once (engine/definitions/files.py,
    `Locations`): resolving the root and a file's folder again for each file was a tenth of a warm
    `validate` of the example yard."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.located = Locations()

    def __call__(self, path: Path) -> str:
        where = self.located(path)
        try:
            return where.relative_to(self.root).as_posix()
        except ValueError:
            return where.as_posix()


def load_project(root: Path, only: Iterable[Path] | None = None) -> Project:
    """Load a yard. `only` restricts which files are reported on (the rest still resolve names)."""
    with collector_paused():  # everything loaded stays alive: see engine/core/gcpause.py
        return _load_project(root.resolve(), only)


def _load_project(root: Path, only: Iterable[Path] | None) -> Project:
    project = Project(root)
    names = Names(root)
    config_path = root / CONFIG_FILE
    # a link that leaves the yard or dangles is reported, not skipped
    if os.path.lexists(config_path):
        doc = _read(project, config_path, Bounds.of(root), names)
        if doc is not None:
            config: ConfigSpec | None = _build(project, doc, "config")
            if config is not None:
                project.config, project.config_doc = config, doc
    bounds = project.bounds()
    _load_blocks(project, root, bounds, names)
    # a yard's own file of the same name wins, even a broken one (its errors are reported, not hidden)
    blocks_dir = (root / project.config.paths.blocks).resolve()
    own = {path.stem for path in project.files if blocks_dir in names.located(path).parents}
    for name, definition in library_blocks().items():
        if name not in own:
            project.blocks.setdefault(name, {definition.spec.version: definition})
    _load_flows(project, root, bounds, names)
    if only is not None:
        wanted = {names(p) for p in only}
        project.diagnostics = [d for d in project.diagnostics if d.file in wanted]
    return project


def _load_blocks(project: Project, root: Path, bounds: Bounds, names: Names) -> None:
    """The yard's block files; a second definition of a block's version is reported, the first kept."""
    for path in _files(project, root / project.config.paths.blocks, bounds, names):
        doc = _read(project, path, bounds, names)
        if doc is None:
            continue
        spec: BlockSpec | None = _build(project, doc, "block")
        if spec is None:
            continue
        versions = project.blocks.setdefault(spec.block, {})
        if spec.version in versions:
            other = versions[spec.version].display
            project.diagnostics.append(
                doc.diag(
                    ("block",),
                    "BY201",
                    f"block '{spec.block}' version {spec.version} is also defined in {other}",
                )
            )
            continue
        versions[spec.version] = Definition(spec, doc)


def _load_flows(project: Project, root: Path, bounds: Bounds, names: Names) -> None:
    """The yard's flow files (not their tests); a second flow of a name is reported, the first kept."""
    for path in _files(project, root / project.config.paths.flows, bounds, names):
        if path.name.endswith((".test.yaml", ".test.yml")):
            continue
        doc = _read(project, path, bounds, names)
        if doc is None:
            continue
        flow: FlowSpec | None = _build(project, doc, "flow")
        if flow is None:
            continue
        if flow.flow in project.flows:
            other = project.flows[flow.flow].display
            project.diagnostics.append(
                doc.diag(("flow",), "BY202", f"flow '{flow.flow}' is also defined in {other}")
            )
            continue
        project.flows[flow.flow] = Definition(flow, doc)


def is_builtin(definition: Definition[Any]) -> bool:
    """Whether a definition comes from the built-in library rather than the yard's files."""
    return definition.doc.display.startswith("<built-in>/")


@functools.cache
def library_blocks() -> dict[str, BlockDef]:
    """The built-in blocks every yard has unless it defines a block of the same name."""
    found: dict[str, BlockDef] = {}
    for path in sorted(p for p in LIBRARY.rglob("*") if p.suffix in YAML_SUFFIXES and p.is_file()):
        doc = load_file(path, f"<built-in>/{path.name}")
        spec = parse_block(doc.data)
        found[spec.block] = Definition(spec, doc)
    return found


def is_definition(name: str) -> bool:
    return Path(name).suffix in YAML_SUFFIXES


def _files(project: Project, folder: Path, bounds: Bounds, names: Names) -> list[Path]:
    """The YAML files of a folder; links out of the yard and special files are reported, not read."""
    listing = list_files(folder, bounds, is_definition, names)
    for path, refusal in listing.refused:
        if path not in project.files:
            project.files.append(path)
            project.diagnostics.append(Diagnostic(names(path), 1, 1, refusal.code, refusal.message))
    return listing.files


def _read(project: Project, path: Path, bounds: Bounds, names: Names) -> Document | None:
    project.files.append(path)
    try:
        return load_file(path, names(path), bounds=bounds)
    except LoadError as exc:
        project.diagnostics.append(exc.diagnostic)
        return None


def _build(project: Project, doc: Document, kind: str) -> Any:
    """The spec of `doc` (a block, flow or config: the caller names its type), or None with its problems
    reported."""
    spec = schema.accepted(doc.data, kind)  # valid as it is: the spec, built once
    if spec is not None:
        return spec
    problems = schema.check(doc, kind)
    if problems:
        project.diagnostics.extend(problems)
        return None
    try:
        return schema.MODELS[kind].validate_python(doc.data)
    except (
        ValidationError
    ) as exc:  # a block kind's own rules (the schema stage leaves them to the model)
        project.diagnostics.extend(schema.model_errors(doc, kind, exc))
        return None
