"""Eval files (`evals/*.yaml`) and their datasets, read with a position for every case.

An eval file is read like a flow (engine/definitions/load.py: safe YAML, positions; the JSON Schema
schemas/eval.schema.json). Its `dataset:` — a JSONL, CSV or YAML file, relative to the eval file, inside
the yard — adds cases before the inline ones; each case remembers where it was written, so that a
problem is reported at `file:line:col` of the dataset row or the eval file (engine/validate/evalchecks.py)
and reports name each case the same way on every run. Imports no LangGraph: `blockyard validate` reads
these, and `blockyard eval` (engine/evals) runs them.

Only the files directly in `evals/` are eval files; a dataset may live in a folder below it
(`evals/data/`), where a YAML dataset is never mistaken for an eval.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from engine.core.diagnostics import Diagnostic
from engine.core.values import JsonDict
from engine.definitions import schema
from engine.definitions.files import Bounds, Refused, TooLarge, list_files, read_bytes
from engine.definitions.load import Document, JsonPath, LoadError, load_file, parse_value
from engine.definitions.project import YAML_SUFFIXES, Names, Project
from engine.spec.common import TypeSpec
from engine.spec.evals import DATASET_FORMATS, Case, EvalSpec

EVALS_FOLDER = "evals"
# JSONL and CSV datasets; a YAML one has the definitions' limit (1 MiB)
MAX_DATASET_BYTES = 64 * 2**20
CASE_KEYS = tuple(field.alias or name for name, field in Case.model_fields.items())


@dataclass(frozen=True)
class Spot:
    """Where a case (or a part of it) was written: a path inside a YAML document, or a line of a JSONL
    or CSV file (whose rows have no finer positions)."""

    display: str
    doc: Document | None = None
    prefix: JsonPath = ()
    line: int = 1

    def at(self, *path: str | int, key: bool = False) -> tuple[int, int]:
        if self.doc is None:
            return self.line, 1
        return self.doc.where((*self.prefix, *path), key=key)

    def diag(
        self, path: JsonPath, code: str, message: str, *, key: bool = False, severity: str = "error"
    ) -> Diagnostic:
        line, col = self.at(*path, key=key)
        return Diagnostic(self.display, line, col, code, message, severity)  # type: ignore[arg-type]

    @property
    def where(self) -> str:
        line, col = self.at()
        return f"{self.display}:{line}:{col}"


@dataclass(frozen=True)
class LoadedCase:
    """One case of an eval, named (its `name`, `case N`, or its dataset file and line), with its place."""

    name: str
    case: Case
    spot: Spot
    csv_row: bool = False  # its inputs are CSV text, read by the declared types (`typed_inputs`)


@dataclass
class EvalDef:
    """An eval file: its spec, document, and cases (the dataset's, then the inline ones)."""

    spec: EvalSpec
    doc: Document
    cases: list[LoadedCase] = field(default_factory=list)
    dataset: str | None = None  # the dataset file as shown (relative to the yard)
    dataset_path: Path | None = None

    @property
    def display(self) -> str:
        return self.doc.display

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class EvalFiles:
    """The yard's eval files that loaded, and every problem found reading them and their datasets."""

    evals: dict[str, EvalDef] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def eval_paths(root: Path, bounds: Bounds, names: Names) -> tuple[list[Path], list[Diagnostic]]:
    """The eval files of the yard (YAML files directly in evals/), and links among them that are refused."""
    folder = root / EVALS_FOLDER
    listing = list_files(folder, bounds, lambda name: name.endswith(YAML_SUFFIXES), names)
    refused = [
        Diagnostic(names(path), 1, 1, refusal.code, refusal.message)
        for path, refusal in listing.refused
        if path.parent == folder
    ]
    return [path for path in listing.files if path.parent == folder], refused


def load_evals(project: Project) -> EvalFiles:
    """Read every eval file of the project's yard, with its dataset."""
    found = EvalFiles()
    if not (
        project.root / EVALS_FOLDER
    ).is_dir():  # most yards: nothing to read, no path to resolve
        return found
    names = Names(project.root)
    bounds = project.bounds()
    paths, refused = eval_paths(project.root, bounds, names)
    found.diagnostics.extend(refused)
    for path in paths:
        found.files.append(path)
        loaded = load_eval(path, project.root, bounds, names, found.diagnostics)
        if loaded is None:
            continue
        if loaded.dataset_path is not None and loaded.dataset_path not in found.files:
            found.files.append(loaded.dataset_path)
        other = found.evals.get(loaded.name)
        if other is not None:
            found.diagnostics.append(
                loaded.doc.diag(
                    ("eval",), "BY883", f"eval '{loaded.name}' is also defined in {other.display}"
                )
            )
            continue
        found.evals[loaded.name] = loaded
    return found


def load_eval(
    path: Path, root: Path, bounds: Bounds, names: Names, problems: list[Diagnostic]
) -> EvalDef | None:
    """One eval file and its dataset; None (its problems added) when the file itself does not load."""
    try:
        doc = load_file(path, names(path), bounds=bounds)
    except LoadError as exc:
        problems.append(exc.diagnostic)
        return None
    spec = schema.accepted(doc.data, "eval")
    if not isinstance(spec, EvalSpec):
        found = schema.check(doc, "eval")
        if found:
            problems.extend(found)
            return None
        try:
            spec = EvalSpec.model_validate(doc.data)
        except ValidationError as exc:  # the schema is generated from the model: rare
            problems.extend(
                doc.diag(
                    tuple(p for p in error["loc"] if isinstance(p, str | int)),
                    "BY100",
                    error["msg"],
                )
                for error in exc.errors()
            )
            return None
    loaded = EvalDef(spec, doc)
    if spec.dataset is not None:
        loaded.dataset, rows = _dataset(spec.dataset, path, root, bounds, names, doc, problems)
        if loaded.dataset is not None:
            loaded.dataset_path = path.parent.joinpath(*PurePosixPath(spec.dataset).parts)
        loaded.cases.extend(rows)
    for number, case in enumerate(spec.cases):
        loaded.cases.append(
            LoadedCase(
                case.name or f"case {number + 1}", case, Spot(doc.display, doc, ("cases", number))
            )
        )
    return loaded


# ---- datasets -----------------------------------------------------------------------------------


def _dataset(
    given: str,
    eval_path: Path,
    root: Path,
    bounds: Bounds,
    names: Names,
    doc: Document,
    problems: list[Diagnostic],
) -> tuple[str | None, list[LoadedCase]]:
    """(the dataset as shown, its cases); a dataset that cannot be read is one problem at `dataset:`."""
    relative = PurePosixPath(given)
    fmt = DATASET_FORMATS.get(relative.suffix.lower())
    if fmt is None:
        problems.append(
            doc.diag(
                ("dataset",),
                "BY884",
                f"dataset '{given}': unknown format; use a .jsonl, .csv, .yaml, .yml or .json file",
            )
        )
        return None, []
    if relative.is_absolute():
        problems.append(
            doc.diag(
                ("dataset",),
                "BY884",
                f"dataset '{given}': write a path relative to the eval file, inside the yard",
            )
        )
        return None, []
    path = eval_path.parent.joinpath(*relative.parts)
    shown = names(path)
    if fmt == "yaml":
        try:
            data = load_file(path, shown, bounds=bounds)
        except LoadError as exc:
            if exc.diagnostic.file != shown or exc.diagnostic.code in ("BY001", "BY008", "BY009"):
                problems.append(_unreadable(doc, given, exc.diagnostic.message))
                return None, []
            problems.append(exc.diagnostic)  # its YAML is broken: at its own line
            return shown, []
        return shown, _yaml_rows(data, problems)
    try:
        raw = read_bytes(path, MAX_DATASET_BYTES, bounds, shown)
        text = raw.decode("utf-8-sig")
    except Refused as exc:
        problems.append(doc.diag(("dataset",), exc.code, exc.message))
        return None, []
    except TooLarge:
        problems.append(_unreadable(doc, given, f"larger than {MAX_DATASET_BYTES // 2**20} MiB"))
        return None, []
    except FileNotFoundError:
        problems.append(_unreadable(doc, given, f"no such file ({shown})"))
        return None, []
    except OSError as exc:
        problems.append(_unreadable(doc, given, f"cannot be read: {exc.strerror or exc}"))
        return None, []
    except UnicodeDecodeError:
        problems.append(_unreadable(doc, given, "not UTF-8 text"))
        return None, []
    rows = (
        _jsonl_rows(text, shown, problems) if fmt == "jsonl" else _csv_rows(text, shown, problems)
    )
    return shown, rows


def _unreadable(doc: Document, given: str, why: str) -> Diagnostic:
    return doc.diag(("dataset",), "BY884", f"dataset '{given}': {why}")


def _yaml_rows(data: Document, problems: list[Diagnostic]) -> list[LoadedCase]:
    if not isinstance(data.data, list):
        problems.append(
            data.diag(
                (),
                "BY885",
                "a YAML dataset is a list of cases (each with inputs, and "
                "optionally name, history, expected, assert)",
            )
        )
        return []
    rows: list[LoadedCase] = []
    for number, row in enumerate(data.data):
        spot = Spot(data.display, data, (number,))
        case = _case(row, spot, problems)
        if case is not None:
            rows.append(LoadedCase(case.name or f"{data.display}:{spot.at()[0]}", case, spot))
    return rows


def _jsonl_rows(text: str, shown: str, problems: list[Diagnostic]) -> list[LoadedCase]:
    rows: list[LoadedCase] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        spot = Spot(shown, line=number)
        try:
            value = json.loads(line)
        except ValueError as exc:
            problems.append(spot.diag((), "BY885", f"not a JSON value: {exc}"))
            continue
        case = _case(value, spot, problems)
        if case is not None:
            rows.append(LoadedCase(case.name or f"{shown}:{number}", case, spot))
    return rows


def _csv_rows(text: str, shown: str, problems: list[Diagnostic]) -> list[LoadedCase]:
    """Each row a case named by its line: its columns are its inputs (text, read by the declared types in
    `typed_inputs`), but a column `expected` is the reference answer."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as exc:
        problems.append(Diagnostic(shown, 1, 1, "BY885", f"not CSV: {exc}"))
        return []
    columns = [column.strip() for column in header]
    rows: list[LoadedCase] = []
    start = reader.line_num + 1
    while True:
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(Diagnostic(shown, start, 1, "BY885", f"not CSV: {exc}"))
            break
        line, start = start, reader.line_num + 1
        if not any(value.strip() for value in values):
            continue
        spot = Spot(shown, line=line)
        if len(values) != len(columns):
            problems.append(
                spot.diag(
                    (), "BY885", f"row has {len(values)} values, the header {len(columns)} columns"
                )
            )
            continue
        cells = dict(zip(columns, values, strict=True))
        expected = cells.pop("expected", None)
        case = _case(
            {"inputs": cells, **({"expected": expected} if expected is not None else {})},
            spot,
            problems,
        )
        if case is not None:
            rows.append(LoadedCase(f"{shown}:{line}", case, spot, csv_row=True))
    return rows


def _case(value: Any, spot: Spot, problems: list[Diagnostic]) -> Case | None:
    if not isinstance(value, dict):
        problems.append(
            spot.diag(
                (),
                "BY885",
                "a dataset row is a case: a mapping with inputs (and optionally "
                f"{', '.join(key for key in CASE_KEYS if key != 'inputs')})",
            )
        )
        return None
    try:
        return Case.model_validate(value)
    except ValidationError as exc:
        for error in exc.errors():
            where = tuple(part for part in error["loc"] if isinstance(part, str | int))
            shown = ".".join(str(part) for part in where) or "row"
            unknown = error["type"] == "extra_forbidden"
            message = (
                f"unknown key '{shown}' in a case (its keys: {', '.join(CASE_KEYS)})"
                if unknown
                else f"{shown}: {error['msg']}"
            )
            problems.append(spot.diag(where, "BY885", message, key=unknown))
        return None


def typed_inputs(loaded: LoadedCase, declared: Mapping[str, TypeSpec]) -> JsonDict:
    """A case's inputs; a CSV row's text read as the declared type wants (a string input keeps its text,
    `007` stays `007`; another reads the text as a YAML value, as `--input` does: `3`, `[a, b]`, `true`)."""
    inputs = dict(loaded.case.inputs)
    if not loaded.csv_row:
        return inputs
    for key, text in inputs.items():
        spec = declared.get(key)
        if isinstance(text, str) and spec is not None and spec.type != "string":
            with contextlib.suppress(ValueError):  # the run refuses it with the type's own message
                inputs[key] = parse_value(text)
    return inputs
