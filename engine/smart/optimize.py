"""`blockyard optimize BLOCK --examples FILE`: compile a smart block with DSPy's BootstrapFewShot.

The examples file (YAML or JSON) is a list of mappings, each with the block's inputs and the
outputs expected for them:

    - {text: "The cat sat on the mat all day.", summary: "A cat rested."}
    - {text: "Stocks fell 3% on Monday.", summary: "Stocks dropped."}

The block's program runs on each example's inputs (with the block's model profile); runs whose
outputs match the example (text compared without case and surrounding space, other values
exactly) become demos, and up to `max_labeled` examples are added as they are. The compiled
program is saved next to the block (`blocks/<file>.dspy.json`); runs of flows use it from then
on, pinned with the run like the block itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from engine.core.diagnostics import did_you_mean
from engine.core.errors import UsageError, ValidationFailed
from engine.core.values import JsonDict
from engine.definitions.files import argument_bounds
from engine.definitions.load import LoadError, load_file
from engine.definitions.pinned import program_path
from engine.definitions.project import BlockDef, Project, load_project, relative
from engine.models import ModelResolver
from engine.smart import dspy_installed, import_dspy, needs_dspy
from engine.smart.lm import lm_for, model_failure
from engine.smart.program import module, saved_state
from engine.spec import SmartBlock
from engine.spec.block import article

Example = JsonDict


def optimize_command(
    root: Path,
    ref: str,
    examples: Path,
    max_demos: int = 4,
    max_labeled: int = 16,
    out: TextIO | None = None,
) -> int:
    """Compile smart block `ref` on `examples`; save the program next to the block. Exit code 0."""
    stream = out or sys.stdout
    project = load_project(root)
    if not project.ok:
        raise ValidationFailed(sorted(project.diagnostics))
    definition, block = _smart_block(project, ref)
    if not dspy_installed():
        raise UsageError(needs_dspy("blockyard optimize"))
    trainset = read_examples(examples, block, root)
    # DSPy's progress bars: this command reports by itself
    os.environ.setdefault("TQDM_DISABLE", "1")
    compiled, bootstrapped = compile_program(project, block, trainset, max_demos, max_labeled)
    target = program_path(definition.doc.path)
    _write_json(target, saved_state(compiled))
    demos = sum(len(predictor.demos) for predictor in compiled.predictors())
    stream.write(
        f"optimized smart block '{block.block}' on {len(trainset)} example"
        f"{'s' if len(trainset) != 1 else ''}: {demos} demo{'s' if demos != 1 else ''} "
        f"({bootstrapped} bootstrapped, {demos - bootstrapped} labeled); saved "
        f"{relative(target, project.root)}\n"
    )
    return 0


def compile_program(
    project: Project, block: SmartBlock, trainset: list[Example], max_demos: int, max_labeled: int
) -> tuple[Any, int]:
    """(the compiled DSPy module, how many demos were bootstrapped)."""
    dspy: Any = import_dspy()
    # the optional extra, imported by import_dspy() above
    from dspy.teleprompt import BootstrapFewShot

    resolver = ModelResolver(project.config, run_id=f"optimize:{block.block}")
    lm, key = lm_for(resolver, block, flow="optimize", step=block.block, inputs={})
    examples = [
        dspy.Example(**example).with_inputs(*[k for k in example if k in block.inputs])
        for example in trainset
    ]
    teleprompter = BootstrapFewShot(
        metric=_metric(block),
        max_bootstrapped_demos=max_demos,
        max_labeled_demos=max_labeled,
        max_errors=len(examples) + 1,
    )
    try:
        # DSPy prints its progress; it goes to stderr so that stdout carries this command's report only
        with dspy.context(lm=lm), contextlib.redirect_stdout(sys.stderr):
            compiled = teleprompter.compile(module(block), trainset=examples)
    except Exception as exc:
        raise model_failure(exc, f"blockyard optimize {block.block}", key) from None
    bootstrapped = sum(
        1
        for predictor in compiled.predictors()
        for demo in predictor.demos
        if demo.get("augmented")
    )
    return compiled, bootstrapped


def read_examples(path: Path, block: SmartBlock, root: Path | None = None) -> list[Example]:
    """The examples of a file, each checked against the block's inputs and outputs. A file inside
    the yard `root` must not be a link that leads out of it."""
    try:
        bounds = argument_bounds(path, root) if root is not None else None
        doc = load_file(path, str(path), bounds=bounds, pipes=bounds is None)
    except LoadError as exc:
        raise UsageError(f"--examples: {exc.diagnostic.format()}") from None
    data = doc.data
    if not isinstance(data, list) or not data:
        raise UsageError(
            f"--examples {path}: expected a list of examples, each a mapping of the block's inputs "
            f"({', '.join(block.inputs) or 'none'}) and outputs ({', '.join(block.outputs)})"
        )
    known = [*block.inputs, *block.outputs]
    for position, example in enumerate(data):
        line, col = doc.where((position,))
        where = f"{path}:{line}:{col}"
        if not isinstance(example, dict):
            raise UsageError(f"{where}: example {position + 1} is not a mapping")
        unknown = [key for key in example if key not in known]
        if unknown:
            raise UsageError(
                f"{where}: example {position + 1}: '{unknown[0]}' is neither an input nor an output of "
                f"block '{block.block}'{did_you_mean(unknown[0], known)}"
            )
        missing = [
            name
            for name, spec in block.inputs.items()
            if name not in example and not spec.has_default
        ]
        missing += [name for name in block.outputs if name not in example]
        if missing:
            raise UsageError(f"{where}: example {position + 1} has no '{missing[0]}'")
    return [dict(example) for example in data]


def _metric(block: SmartBlock) -> Any:
    names = list(block.outputs)

    def same(expected: Any, got: Any) -> bool:
        if isinstance(expected, str) and isinstance(got, str):
            return expected.strip().casefold() == got.strip().casefold()
        return bool(expected == got)

    def metric(example: Any, prediction: Any, trace: Any = None) -> bool:
        return all(same(example.get(name), prediction.get(name)) for name in names)

    return metric


def _smart_block(project: Project, ref: str) -> tuple[BlockDef, SmartBlock]:
    definition = project.block(ref)
    if definition is None:
        raise UsageError(f"unknown block '{ref}'{did_you_mean(ref.split('@')[0], project.blocks)}")
    spec = definition.spec
    if not isinstance(spec, SmartBlock):
        raise UsageError(
            f"block '{spec.block}' is {article(spec.kind)} block; "
            "`blockyard optimize` compiles smart blocks"
        )
    return definition, spec


def _write_json(path: Path, data: Any) -> None:
    """Write atomically: a crash never leaves half a program next to the block."""
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str) + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
