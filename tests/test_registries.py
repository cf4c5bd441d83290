"""Every registry of the engine is visible to the checks (docs/architecture.md, "Registries").

A registry names its members in strings and imports one only when it is used (a cold `blockyard run`,
a fast `blockyard validate`), so its members are also imported under `if TYPE_CHECKING:` in the
registry's module: there import-linter counts the edge (its contracts hold the registry to the layers)
and mypy checks each member against the registry's type. These tests keep the strings and those
imports in step, import every string target and check it is what the registry calls, and make sure
no registry is left out.
"""

from __future__ import annotations

import ast
import collections.abc
import importlib
import inspect
import os
import shutil
import subprocess
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import click
import grimp

import engine.cli
import engine.compile.builder
import engine.compile.constructs
import engine.compile.wired
import engine.executors
import engine.models
import engine.models.providers
import engine.tools
from engine.compile.flowgraph import route_label
from engine.compile.router import _matcher as router_matcher
from engine.spec.block import BLOCK_KINDS, BLOCK_MODELS
from engine.spec.flow import ACTIONS, ROUTE_CONDITIONS, ROUTE_MODELS, STEP_MODELS, parse_route

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Registry:
    """One registry: its module, the name of the tuple that lists its members under TYPE_CHECKING, its
    string targets (module, attribute), and the type each target must have (a Callable alias or a class)."""

    module: str
    members: str
    targets: set[tuple[str, str]]
    kind: object


REGISTRIES = [
    Registry(
        "engine.executors",
        "_MEMBERS",
        {
            (f"engine.executors.{module}", "prepare")
            for module in engine.executors.EXECUTORS.values()
        },
        engine.executors.Preparer,
    ),
    Registry(
        "engine.compile.constructs",
        "_BUILDERS",
        {
            (f"engine.compile.{module}", "build")
            for module in engine.compile.constructs.BUILDERS.values()
        },
        engine.compile.builder.Construct,
    ),
    Registry(
        "engine.compile.constructs",
        "_WRAPPERS",
        {
            (f"engine.compile.{module}", "wrap")
            for module in engine.compile.constructs.WRAPPERS.values()
        },
        engine.compile.constructs.Wrapper,
    ),
    Registry(
        "engine.compile.wired",
        "_MEMBERS",
        {(engine.compile.wired.WIRING, "executor_for")},
        engine.compile.wired.Wiring,
    ),
    # the mock is imported at the top of the module: it answers every run script
    Registry(
        "engine.models.providers",
        "_MEMBERS",
        {
            (f"engine.models.providers.{provider}", "make")
            for provider in engine.models.providers.PROVIDERS
            if provider != "mock"
        },
        engine.models.providers.Maker,
    ),
    Registry(
        "engine.cli",
        "_members",
        {
            (module, name)
            for module, _, name in (where.partition(":") for where in engine.cli.COMMANDS.values())
        },
        click.Command,
    ),
]

# the packages whose names load with their module on first use (PEP 562): name -> its home module
LAZY_NAMES: dict[ModuleType, dict[str, str]] = {
    engine.models: {name: f"engine.models.{home}" for name, home in engine.models._HOMES.items()},
    engine.tools: engine.tools._LAZY,
}

# modules of engine/ that import a module named by a string, and are not registries of engine's own modules
NOT_REGISTRIES = {
    "engine.tools.loader": "loads the yard's own Python tools (blockyard.yaml), not the engine's"
}


def _tree(module: str) -> ast.Module:
    path = REPO / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = REPO / module.replace(".", "/") / "__init__.py"
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _type_checking_block(module: str) -> list[ast.stmt]:
    for node in _tree(module).body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            return node.body
    raise AssertionError(
        f"{module} has no `if TYPE_CHECKING:` block importing its registry's members"
    )


def _imported_names(block: list[ast.stmt]) -> dict[str, str]:
    """Each name an import of `block` binds -> the full name it stands for (a module, or module.name)."""
    names: dict[str, str] = {}
    for node in block:
        if isinstance(node, ast.ImportFrom) and node.module:
            names.update(
                {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}
            )
    return names


def _listed(registry: Registry) -> set[tuple[str, str]]:
    """The (module, attribute) pairs the TYPE_CHECKING tuple `registry.members` lists."""
    block = _type_checking_block(registry.module)
    names = _imported_names(block)
    # a typed tuple, or a function returning one (where the members' modules import the registry's)
    (value,) = [
        node.value
        for node in block
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == registry.members
    ] + [
        node.body[-1].value
        for node in block
        if isinstance(node, ast.FunctionDef)
        and node.name == registry.members
        and isinstance(node.body[-1], ast.Return)
    ]
    assert isinstance(value, ast.Tuple), (
        f"{registry.module}.{registry.members}: a tuple of the members"
    )
    listed = set()
    for element in value.elts:
        assert isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name), (
            ast.unparse(element)
        )
        listed.add((names[element.value.id], element.attr))
    return listed


def _resolved(hint: object, module: ModuleType) -> object:
    """A type as a registry's alias writes it, its names (a forward reference) looked up in `module`."""
    name = hint.__forward_arg__ if isinstance(hint, typing.ForwardRef) else hint
    # the engine's own annotation
    return eval(name, vars(module)) if isinstance(name, str) else name


def _annotation(function: Callable[..., object], name: str) -> object:
    text = function.__annotations__[name]
    return eval(text, function.__globals__) if isinstance(text, str) else text


def _is_a(actual: object, expected: object) -> bool:
    """Whether what a member returns is what its registry expects: the same type, a subclass, or a
    class with every method of the Protocol expected (mypy checks the rest of a Protocol: its
    attributes are set by __init__)."""
    if actual == expected:
        return True
    if not isinstance(actual, type) or not isinstance(expected, type):
        return False
    if getattr(expected, "_is_protocol", False):
        methods = {
            name
            for name, value in vars(expected).items()
            if callable(value) and not name.startswith("_")
        }
        return all(callable(getattr(actual, name, None)) for name in methods)
    return issubclass(actual, expected)


def _fits(target: object, kind: object, registry: ModuleType) -> list[str]:
    """What keeps `target` from being called as `kind` (a class, or a Callable[[...], R] alias)."""
    if isinstance(kind, type):
        return [] if isinstance(target, kind) else [f"not a {kind.__name__}"]
    assert typing.get_origin(kind) is collections.abc.Callable, kind
    arguments, returned = typing.get_args(kind)
    assert callable(target)
    parameters = list(inspect.signature(target).parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    problems = [
        f"{p.name} has no default"
        for p in parameters[len(arguments) :]
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if len(positional) < len(arguments):
        return [
            *problems,
            f"takes {len(positional)} positional arguments, the registry passes {len(arguments)}",
        ]
    for parameter, argument in zip(positional, arguments, strict=False):
        if argument is typing.Any:  # the member says what it takes: a test of its own checks it
            continue
        if _annotation(target, parameter.name) != _resolved(argument, registry):
            problems.append(
                f"{parameter.name}: {parameter.annotation}, the registry passes {argument}"
            )
    if not _is_a(_annotation(target, "return"), _resolved(returned, registry)):
        problems.append(
            f"returns {inspect.signature(target).return_annotation}, the registry expects {returned}"
        )
    return problems


def _graph() -> grimp.ImportGraph:
    # the graph import-linter builds from pyproject.toml's [tool.importlinter]
    return grimp.build_graph("engine", include_external_packages=True, cache_dir=None)


def test_every_string_target_imports_and_fits_its_registry() -> None:
    problems = []
    for registry in REGISTRIES:
        home = importlib.import_module(registry.module)
        for module, name in sorted(registry.targets):
            target = getattr(importlib.import_module(module), name, None)
            if target is None:
                problems.append(f"{registry.module}: {module} has no '{name}'")
                continue
            problems += [
                f"{registry.module}: {module}.{name}: {problem}"
                for problem in _fits(target, registry.kind, home)
            ]
    assert problems == []


def test_every_lazy_name_is_its_home_modules() -> None:
    for package, homes in LAZY_NAMES.items():
        for name, home in homes.items():
            assert getattr(package, name) is getattr(importlib.import_module(home), name), (
                f"{package.__name__}.{name}"
            )
        assert set(homes) <= set(package.__all__), package.__name__


def test_every_member_is_imported_for_the_checks() -> None:
    """The TYPE_CHECKING imports of a registry list exactly its string targets: mypy checks each, and
    import-linter sees each edge."""
    for registry in REGISTRIES:
        assert _listed(registry) == registry.targets, (
            f"{registry.module}.{registry.members} is out of step"
        )
    for package, homes in LAZY_NAMES.items():
        names = _imported_names(_type_checking_block(package.__name__))
        assert names == {name: f"{home}.{name}" for name, home in homes.items()}, package.__name__


def test_import_linter_sees_every_edge() -> None:
    graph = _graph()
    edges = {(registry.module, module) for registry in REGISTRIES for module, _ in registry.targets}
    edges |= {
        (package.__name__, home) for package, homes in LAZY_NAMES.items() for home in homes.values()
    }
    unseen = sorted(
        edge for edge in edges if not graph.direct_import_exists(importer=edge[0], imported=edge[1])
    )
    assert unseen == [], f"import-linter does not see these imports: {unseen}"


def test_no_registry_is_left_out() -> None:
    """A module of engine/ that imports by a string is one of the registries above (or says why not)."""
    known = {registry.module for registry in REGISTRIES} | {
        package.__name__ for package in LAZY_NAMES
    }
    found = set()
    for path in (REPO / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
                == "import_module"
            ):
                parts = path.relative_to(REPO).with_suffix("").parts
                found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert sorted(found - known - set(NOT_REGISTRIES)) == [], (
        "add these registries to tests/test_registries.py"
    )
    assert sorted(known - found) == [], "these modules import by a string no more: drop them here"


def test_a_member_against_the_layers_breaks_the_contracts(tmp_path: Path) -> None:
    """A registry's member from a layer above it is caught, though it is imported only for the checks."""
    shutil.copytree(
        REPO / "engine", tmp_path / "engine", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    registry = tmp_path / "engine" / "executors" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    anchor = "if TYPE_CHECKING:"
    assert anchor in text
    registry.write_text(
        text.replace(anchor, anchor + "\n    from engine.runtime import engine as _engine", 1),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the copy, not the checkout
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    result = subprocess.run(
        [sys.executable, "-c", code, "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "engine.executors is not allowed to import engine.runtime" in result.stdout


def test_every_router_condition_is_a_field_a_matcher_and_a_label() -> None:
    # ROUTE_CONDITIONS is the one list (the validator and the React Flow import read it): a condition added
    # there without its field, its matcher or its edge label fails here (docs/architecture.md, "Where to change")
    assert list(ROUTE_MODELS) == list(ROUTE_CONDITIONS) and ROUTE_CONDITIONS
    for name, model in ROUTE_MODELS.items():
        assert set(model.model_fields) == {name, "goto"} and model.kind == name
        route = parse_route({name: "x", "goto": "end"})
        assert type(route) is model
        matches = router_matcher(route, "flow f, step r", 1)
        assert callable(matches)
        assert route_label(route) == f"{name.replace('_', ' ')} x"


def test_each_executor_takes_the_models_of_its_kinds() -> None:
    # `prepare` is handed a block of the kinds EXECUTORS gives its module, so it is typed with their models
    # (a ToolBlock's `tool` is there by type): a kind moved to another module without its model fails here
    modules: dict[str, list[type]] = {}
    for kind, module in engine.executors.EXECUTORS.items():
        modules.setdefault(module, []).append(BLOCK_MODELS[kind])
    assert len(modules) == 7
    for module, models in modules.items():
        prepare = importlib.import_module(f"engine.executors.{module}").prepare
        taken = _annotation(prepare, next(iter(inspect.signature(prepare).parameters)))
        assert set(typing.get_args(taken) or (taken,)) == set(models), (module, taken)


def test_each_construct_takes_the_model_of_its_action() -> None:
    # `build` is handed a step of the action BUILDERS gives its module, so it is typed with that action's
    # model (a LoopStep's `loop` is there by type)
    assert list(STEP_MODELS) == list(ACTIONS)  # the one list of actions, each with its model
    assert sorted(engine.compile.constructs.BUILDERS) == sorted(STEP_MODELS)
    for action, module in engine.compile.constructs.BUILDERS.items():
        build = importlib.import_module(f"engine.compile.{module}").build
        assert _annotation(build, "step") is STEP_MODELS[action], (module, action)


def test_every_block_kind_has_its_executor_and_no_other() -> None:
    # a kind added to BlockKind (engine/spec/block.py) without its executor, or an executor for a kind the
    # spec does not know, fails here (docs/architecture.md, "Adding a block kind")
    assert sorted(engine.executors.EXECUTORS) == sorted(BLOCK_KINDS)
