"""What each block kind needs, the keys that fit it, and the templates it carries."""

from __future__ import annotations

import contextlib
from collections.abc import Collection

from engine.core.diagnostics import Diagnostic, did_you_mean
from engine.definitions.load import JsonPath
from engine.definitions.project import BlockDef, Project
from engine.definitions.prompts import (
    MAX_DEPTH,
    PromptFileError,
    includes,
    normal,
    pin,
    prompt_sources,
    read_prompt,
)
from engine.spec import (
    AgentBlock,
    DecideBlock,
    MemoryReadBlock,
    MemoryWriteBlock,
    ModelBlock,
    ModelProfile,
    PromptSpec,
    SmartBlock,
    ToolBlock,
    TransformBlock,
)
from engine.spec.block import KIND_REQUIRES, article, missing_words
from engine.templates.render import TemplateError, references
from engine.validate.semantic.config import known_profiles, known_tools, profile_problems
from engine.validate.semantic.defaults import default_problems
from engine.validate.semantic.index import issue, quote_list
from engine.validate.semantic.templates import MEMORY_NAMES, Resolver, analyze, names_scope, scan

PROMPTED = frozenset(kind for kind, keys in KIND_REQUIRES.items() if "prompt" in keys)
# a decide block's outputs have their own rule (BY353: exactly one, with an enum)
NEEDS_OUTPUTS = frozenset(kind for kind, keys in KIND_REQUIRES.items() if "outputs" in keys) - {
    "decide"
}
# A smart block's inputs and outputs become the fields of a DSPy signature (engine/smart/program.py), a
# pydantic model: DSPy refuses these names (attributes of its Signature class and of pydantic's models),
# and any name with a leading underscore. tests/smart/test_smart_names.py keeps the list true to the
# installed DSPy; it is written out here because validation never imports DSPy.
DSPY_RESERVED = frozenset(
    {
        "fields",
        "input_fields",
        "instructions",
        "model_config",
        "model_dump",
        "model_dump_json",
        "model_validate",
        "model_validate_json",
        "model_validate_strings",
        "output_fields",
        "signature",
    }
)


class BlockCheck:
    """Collects the problems of one block file."""

    def __init__(self, project: Project, definition: BlockDef) -> None:
        self.project = project
        self.definition = definition
        self.spec = definition.spec
        self.found: list[Diagnostic] = []

    def report(self, path: JsonPath, code: str, message: str, *, key: bool = False) -> None:
        self.found.append(
            issue(self.definition.doc, path, code, f"block '{self.spec.block}': {message}", key=key)
        )

    def run(self) -> list[Diagnostic]:
        self.requirements()
        self.defaults()
        self.references()
        self.templates()
        return self.found

    def requirements(self) -> None:
        """What a kind needs beyond its model's keys (those are its shape: engine/spec/block.py, reported
        by the schema stage with these same codes)."""
        spec = self.spec
        kind = spec.kind
        if isinstance(spec, TransformBlock):
            self.compute(spec)
        elif isinstance(spec, MemoryWriteBlock):
            self.memory_write(spec)
        if isinstance(spec, DecideBlock):
            self.decision(spec)
        if isinstance(spec, ModelBlock) and kind in PROMPTED:
            prompt = spec.prompt
            if prompt is not None and not (prompt.user or prompt.user_file):
                # the words of a missing prompt (the model's shape), at the prompt that lacks its message
                code, words = missing_words(kind, "prompt")
                self.report(("prompt",), code, words, key=True)
        if kind in NEEDS_OUTPUTS and not spec.outputs:
            self.report(
                ("kind",),
                "BY358",
                f"{article(kind)} block needs `outputs:`, the values it produces",
            )
        if isinstance(spec, SmartBlock):
            self.smart_fields(spec)

    def decision(self, spec: DecideBlock) -> None:
        enums = [name for name, decl in spec.outputs.items() if decl.enum]
        if len(spec.outputs) != 1 or len(enums) != 1:
            where = ("outputs",) if spec.outputs else ("kind",)
            found = (
                f"it has {len(spec.outputs)} outputs"
                if len(spec.outputs) != 1
                else f"output '{next(iter(spec.outputs))}' has no enum"
            )
            self.report(
                where,
                "BY353",
                f"a decide block needs exactly one output with an `enum:` of its choices; {found}",
                key=bool(spec.outputs),
            )

    def defaults(self) -> None:
        """BY360: each default of the block's inputs and outputs fits its declaration."""
        for part, declared in (("inputs", self.spec.inputs), ("outputs", self.spec.outputs)):
            for name, decl in declared.items():
                for where, message in default_problems(decl, (part, name), name):
                    self.report(where, "BY360", f"the default of {part[:-1]} {message}")

    def smart_fields(self, spec: SmartBlock) -> None:
        """A smart block's inputs and outputs are one DSPy signature's fields: names DSPy takes, each once."""
        for part, names in (("inputs", spec.inputs), ("outputs", spec.outputs)):
            for name in names:
                if name.startswith("_") or name in DSPY_RESERVED:
                    why = (
                        "starts with an underscore"
                        if name.startswith("_")
                        else "is a name DSPy keeps for itself"
                    )
                    self.report(
                        (part, name),
                        "BY359",
                        f"{part[:-1]} '{name}' {why}: a smart block's inputs and "
                        "outputs are the fields of a DSPy signature; rename it",
                        key=True,
                    )
                elif part == "outputs" and name in spec.inputs:
                    self.report(
                        (part, name),
                        "BY359",
                        f"'{name}' is both an input and an output: a smart block's "
                        "inputs and outputs are the fields of one DSPy signature; "
                        "rename one",
                        key=True,
                    )

    def memory_write(self, spec: MemoryWriteBlock) -> None:
        """What a memory_write block stores: the inputs its key does not read; it writes no outputs."""
        if spec.outputs:
            self.report(
                ("outputs",),
                "BY356",
                "`outputs` does not apply to a memory_write block: it only writes "
                "memory (drop `outputs:`)",
                key=True,
            )
        key = spec.memory.key
        if key is None:
            if spec.memory.namespace == "preferences":
                self.report(
                    ("memory",),
                    "BY443",
                    "a memory_write block that writes a preference needs "
                    "memory.key, the preference's name",
                    key=True,
                )
            read: set[str] = set()
        else:
            try:
                read = {path[0] for path in references(key)}
            except TemplateError:
                return  # the template's own check (BY400) says what is wrong
        if not [name for name in spec.inputs if name not in read]:
            where = ("memory", "key") if key is not None else ("kind",)
            self.report(
                where,
                "BY444",
                "a memory_write block stores its inputs that memory.key does not read, "
                "and it has none left: add the input to store",
                key=key is not None,
            )

    def compute(self, spec: TransformBlock) -> None:
        missing = [name for name in spec.outputs if name not in spec.compute]
        if missing:
            self.report(
                ("compute",),
                "BY350",
                f"output{'s' if len(missing) > 1 else ''} {quote_list(missing)} "
                f"{'have' if len(missing) > 1 else 'has'} no compute expression",
                key=True,
            )
        for name in spec.compute:
            if name not in spec.outputs:
                self.report(
                    ("compute", name),
                    "BY350",
                    f"compute '{name}' is not a declared output{did_you_mean(name, spec.outputs)}",
                    key=True,
                )

    def references(self) -> None:
        spec = self.spec
        tools = known_tools(self.project)
        named: list[tuple[tuple[str | int, ...], str]] = []
        if isinstance(spec, AgentBlock):
            named = [(("tools", position), name) for position, name in enumerate(spec.tools)]
        elif isinstance(spec, ToolBlock):
            named.append((("tool",), spec.tool))
        for where, name in named:
            if name not in tools:
                listed = f"known tools: {', '.join(tools)}" if tools else "no tools are known"
                self.report(
                    where,
                    "BY501",
                    f"unknown tool '{name}'{did_you_mean(name, tools)} ({listed}; "
                    "declare yard tools under `tools:` in blockyard.yaml)",
                )
        if isinstance(spec, ModelBlock):
            self.model(spec)
        if isinstance(spec, AgentBlock):
            self.delegates(spec)

    def model(self, spec: ModelBlock) -> None:
        if isinstance(spec.model, str):
            profiles = known_profiles(self.project)
            if spec.model not in profiles:
                self.report(
                    ("model",),
                    "BY502",
                    f"unknown model profile '{spec.model}'{did_you_mean(spec.model, profiles)} "
                    f"(profiles: {', '.join(profiles)}; declare them under `models:` in blockyard.yaml)",
                )
        elif isinstance(spec.model, ModelProfile):
            for sub, code, message, key in profile_problems(spec.model):
                self.report(("model", *sub), code, message, key=key)

    def delegates(self, spec: AgentBlock) -> None:
        for position, name in enumerate(spec.delegates):
            agent = self.project.block(name)
            if name in self.project.flows or (agent is not None and agent.spec.kind == "agent"):
                continue
            reason = (
                f"block '{name}' is not an agent block"
                if agent is not None
                else f"there is no agent block or flow of that name{did_you_mean(name, self._agents())}"
            )
            self.report(("delegates", position), "BY218", f"delegate '{name}': {reason}")

    def _agents(self) -> list[str]:
        agents = [
            name
            for name, versions in self.project.blocks.items()
            if versions[max(versions)].spec.kind == "agent"
        ]
        return [*agents, *self.project.flows]

    def templates(self) -> None:
        spec = self.spec
        inputs = list(spec.inputs)
        if isinstance(spec, ModelBlock) and spec.prompt is not None:
            self.prompt(spec.prompt, names_scope(inputs, "a prompt", extra=MEMORY_NAMES))
        if isinstance(spec, TransformBlock):
            resolve = names_scope(inputs, "a compute expression")
            for name, source in spec.compute.items():
                self.scan(
                    ("compute", name), source, resolve, expression=True, what=f"compute '{name}'"
                )
        if isinstance(spec, MemoryReadBlock | MemoryWriteBlock) and spec.memory.key is not None:
            self.scan(
                ("memory", "key"),
                spec.memory.key,
                names_scope(inputs, "a memory key"),
                expression=False,
                what="memory.key",
            )

    def scan(
        self,
        path: JsonPath,
        source: str,
        resolve: Resolver,
        *,
        expression: bool,
        what: str,
        includes: bool = False,
    ) -> None:
        for problem in scan(source, resolve, expression=expression, includes=includes):
            self.report(path, problem.code, f"{what}: {problem.message}")

    def prompt(self, prompt: PromptSpec, resolve: Resolver) -> None:
        """The prompt's texts and files, and every file they include (BY430-BY432), each checked like
        the prompt itself; problems inside a file are reported where the prompt names or includes it."""
        for part, inline, name in prompt_sources(prompt):
            if inline is not None and name is not None:
                self.report(
                    ("prompt", f"{part}_file"),
                    "BY432",
                    f"prompt.{part} and prompt.{part}_file are both given; keep one",
                    key=True,
                )
            if inline is not None:
                self.scan(
                    ("prompt", part),
                    inline,
                    resolve,
                    expression=False,
                    what=f"prompt.{part}",
                    includes=True,
                )
                self.includes(("prompt", part), inline, f"prompt.{part}", resolve, ())
            if name is not None:
                where: JsonPath = ("prompt", f"{part}_file")
                text = self.read(where, name, f"prompt.{part}_file")
                if text is None:
                    continue
                what = f"prompt.{part}_file {normal(name)}"
                self.scan(where, text, resolve, expression=False, what=what, includes=True)
                self.includes(where, text, what, resolve, (normal(name),))

    def includes(
        self, path: JsonPath, source: str, what: str, resolve: Resolver, chain: tuple[str, ...]
    ) -> None:
        for found in includes(source):
            at = f"{what}, line {found.line}" if "\n" in source.strip() else what
            if found.name is None:
                self.report(
                    path,
                    "BY431",
                    f"{at}: {{% include %}} needs the file's name as a constant text, "
                    "e.g. {% include 'prompts/rules.md' %}",
                )
                continue
            name = normal(found.name)
            if name in chain:
                self.report(
                    path,
                    "BY431",
                    f"{at}: {{% include '{found.name}' %}} includes itself "
                    f"({' → '.join([*chain, name])})",
                )
                continue
            if len(chain) >= MAX_DEPTH:
                self.report(
                    path,
                    "BY431",
                    f"{at}: {{% include '{found.name}' %}} is more than {MAX_DEPTH} files deep",
                )
                continue
            text = self.read(path, found.name, f"{at}: {{% include %}}")
            if text is None:
                continue
            inner = f"{what} → {name}"
            self.scan(path, text, resolve, expression=False, what=inner, includes=True)
            self.includes(path, text, inner, resolve, (*chain, name))

    def read(self, path: JsonPath, name: str, what: str) -> str | None:
        """A prompt file's text, or None after reporting why it cannot be read (BY430)."""
        try:
            return read_prompt(self.project.root, self.project.bounds(), name)
        except PromptFileError as exc:
            self.report(path, "BY430", f"{what}: {exc}")
            return None


def check_blocks(project: Project, names: Collection[str] | None = None) -> list[Diagnostic]:
    """Problems of every version of every block (of the blocks named, when `names` is given)."""
    found: list[Diagnostic] = []
    for name, versions in project.blocks.items():
        if names is not None and name not in names:
            continue
        for definition in versions.values():
            found.extend(BlockCheck(project, definition).run())
    return found


def prompt_memory_names(definition: BlockDef, project: Project | None = None) -> list[str]:
    """The memory variables a block's prompt reads (they need the flow to have a memory scope),
    in its prompt files and the files they include too when `project` is given."""
    spec = definition.spec
    prompt = spec.prompt if isinstance(spec, ModelBlock) else None
    if prompt is None:
        return []
    sources = [source for source in (prompt.system, prompt.user) if source is not None]
    files = [name for name in (prompt.system_file, prompt.user_file) if name is not None]
    if project is not None and (files or any(includes(source) for source in sources)):
        # reported by the block's own check (BY430, BY431)
        with contextlib.suppress(PromptFileError):
            sources.extend(pin(project.root, project.bounds(), sources, files).values())
    used: list[str] = []
    for source in sources:
        used.extend(
            path[0]
            for path in analyze(source, False).paths
            if path[0] in MEMORY_NAMES and path[0] not in definition.spec.inputs
        )
    return list(dict.fromkeys(used))
