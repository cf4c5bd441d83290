"""The tests themselves, checked for the habits that let a planted bug through (issue 36, docs/testing.md):

- every `pytest.raises` names the message it expects (`match=`): a test that accepts any exception of a
  type passes when the code fails for another reason than the one it claims to test;
- a test whose every assert sits in a loop over a collection it computed, in an `if` without an `else`
  or in an `except`, first asserts that the loop has something to go over: a glob that finds nothing,
  or a branch never taken, passes having checked nothing;
- no assert compares an expression with itself.

Each check parses every test file (no test runs); the reviewed exceptions are listed below, each with
its reason."""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# path::function (test_x.inner for a function defined in a test) -> why its `pytest.raises` needs no `match=`
RAISES_WITHOUT_MATCH: dict[str, str] = {
    "tests/runtime/test_durability.py::test_an_interrupted_exit_run_keeps_its_checkpoint_and_resumes.main": "asyncio.CancelledError carries no message",
    "tests/runtime/test_yard_api.py::test_a_cancelled_run_is_interrupted_and_resumable.main": "asyncio.CancelledError carries no message",
    "tests/state/test_postgres_reconnect.py::"
    "test_the_memory_store_opens_a_new_session_after_the_call_that_met_the_lost_one": "psycopg's OperationalError for a lost session: its text is the server's and the driver's, and differs "
    "between their versions",
}

# path::function -> why a test whose asserts all sit in a loop or a branch cannot pass having checked nothing
CONDITIONAL_ONLY: dict[str, str] = {
    "tests/validate/test_validate_properties.py::test_the_fast_path_never_accepts_what_the_schema_rejects": "a property: what the fast path accepts must be valid; it refuses most mutated documents by design "
    "(the file's other tests pin what it accepts)",
    "tests/test_reference.py::test_links_in_the_pages_point_one_folder_up": "new with issue 30's reference pages (another change in progress): reference.render() names its pages; "
    "to be given a check that it rendered some",
    "tests/validate/test_validate_scaling.py::test_reach_masks_agree_with_reachable": "the loop's nodes are never empty: each graph has randint(1, 12) of them",
}

# path::function -> why its assert compares an expression with itself
SELF_COMPARISONS: dict[str, str] = {
    "tests/telemetry/test_batch.py::test_event_times_read_as_nanoseconds_since_the_epoch": "the second call reads what the first one kept (a cache): a cache that returned another time fails",
}

# tests whose every assert is inside one of these may pass without asserting anything
_GUARDS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.ExceptHandler)


def suite_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts)


@dataclass(frozen=True)
class Function:
    path: str  # from the repository's root
    node: ast.FunctionDef | ast.AsyncFunctionDef
    constants: dict[str, ast.expr]  # the module's top-level NAME = value
    name: str  # test_x, or test_x.main for a function defined inside it

    @property
    def key(self) -> str:
        return f"{self.path}::{self.name}"


@functools.cache  # the tests below each walk them all: parsing the suite once is ~2 s of CPU
def functions() -> tuple[Function, ...]:
    """Every function of every test file (tests, their helpers, nested functions)."""
    found = [
        function
        for path in suite_files()
        for function in functions_of(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert len(found) > 1000, "the test files were not found"  # a check over nothing would pass
    return tuple(found)


def functions_of(source: str, path: str) -> Iterator[Function]:
    tree = ast.parse(source, filename=path)
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    constants.update(
        {
            node.target.id: node.value
            for node in tree.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value
        }
    )

    def walk(node: ast.AST, prefix: str) -> Iterator[Function]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield Function(path, child, constants, f"{prefix}{child.name}")
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def is_pytest_raises(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "raises"
        and isinstance(func.value, ast.Name)
        and func.value.id == "pytest"
    )


def raises_without_match(every: Sequence[Function]) -> list[str]:
    found = []
    for function in every:
        for node in own_nodes(function.node):
            # the function form, pytest.raises(E, f, *args), has no match=; the suite uses the `with` form
            if (
                isinstance(node, ast.Call)
                and is_pytest_raises(node)
                and function.key not in RAISES_WITHOUT_MATCH
                and not any(keyword.arg == "match" for keyword in node.keywords)
            ):
                found.append(f"{function.path}:{node.lineno} ({function.name})")
    return found


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `function`'s body, not those of the functions and classes defined inside it."""
    for child in ast.iter_child_nodes(function):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield child
        yield from own_nodes(child)


def guarded_asserts(function: Function) -> tuple[int, int]:
    """(asserts of the function, how many of them may never run: inside a loop over a collection that may
    be empty, an `if` without `else`, an `except`)."""
    total = guarded = 0
    constants = local_constants(function)

    def visit(node: ast.AST, under_guard: bool) -> None:
        nonlocal total, guarded
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            ):
                continue
            if isinstance(child, ast.Assert):
                total += 1
                guarded += under_guard
            guard = under_guard or (
                isinstance(child, _GUARDS) and not never_empty(child, constants)
            )
            if isinstance(child, ast.If | ast.For | ast.AsyncFor | ast.While) and child.orelse:
                # the test of the `if`, the loop's iterable, the body: under the guard; the `else`: not,
                # for an `if` (one of the two branches runs)
                for part in (
                    child.test if isinstance(child, ast.If | ast.While) else child.iter,
                    *child.body,
                ):
                    visit_one(part, guard)
                for part in child.orelse:
                    visit_one(part, under_guard if isinstance(child, ast.If) else guard)
                continue
            visit(child, guard)

    def visit_one(node: ast.AST, under_guard: bool) -> None:
        nonlocal total, guarded
        if isinstance(node, ast.Assert):
            total += 1
            guarded += under_guard
        visit(node, under_guard or (isinstance(node, _GUARDS) and not never_empty(node, constants)))

    visit(function.node, False)
    return total, guarded


def local_constants(function: Function) -> dict[str, ast.expr]:
    """The module's constants and the names the function itself binds once, at its top level."""
    found = dict(function.constants)
    for node in function.node.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            found[node.targets[0].id] = node.value
    return found


def never_empty(node: ast.AST, constants: dict[str, ast.expr]) -> bool:
    """Whether a loop surely runs its body: it goes over a non-empty literal (or a module constant that is
    one, or range(N) with N > 0). An `if`, a `while`, an `except`: never surely."""
    if not isinstance(node, ast.For | ast.AsyncFor):
        return False
    return literal_non_empty(node.iter, constants, depth=0)


def literal_non_empty(node: ast.expr, constants: dict[str, ast.expr], depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.Name) and node.id in constants:
        return literal_non_empty(constants[node.id], constants, depth + 1)
    if isinstance(node, ast.Call):
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("range", "enumerate", "sorted", "zip", "reversed")
            and node.args
        ):
            if func.id == "range":
                bound = node.args[-1] if len(node.args) == 1 else None
                return (
                    isinstance(bound, ast.Constant)
                    and isinstance(bound.value, int)
                    and bound.value > 0
                )
            return all(literal_non_empty(arg, constants, depth + 1) for arg in node.args)
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("items", "keys", "values")
            and not node.args
        ):
            return literal_non_empty(func.value, constants, depth + 1)
    return False


def conditional_only(every: Sequence[Function]) -> list[str]:
    found = []
    for function in every:
        if not function.node.name.startswith("test") or function.key in CONDITIONAL_ONLY:
            continue
        total, guarded = guarded_asserts(function)
        if total and guarded == total:
            found.append(f"{function.path}:{function.node.lineno} ({function.node.name})")
    return found


def self_comparisons(every: Sequence[Function]) -> list[str]:
    found = []
    for function in every:
        if function.key in SELF_COMPARISONS:
            continue
        for node in own_nodes(function.node):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                for left, right in itertools.pairwise(sides):
                    if ast.dump(left) == ast.dump(right):
                        found.append(f"{function.path}:{node.lineno} ({ast.unparse(node)})")
    return found


def test_every_pytest_raises_names_the_message_it_expects() -> None:
    found = raises_without_match(functions())
    assert found == [], (
        "add match= with the stable head of the expected message (or list the call in "
        "RAISES_WITHOUT_MATCH with the reason): " + "; ".join(found)
    )


def test_the_reviewed_exceptions_are_still_there() -> None:
    keys = {function.key for function in functions()}
    stale = [
        key
        for key in [*RAISES_WITHOUT_MATCH, *CONDITIONAL_ONLY, *SELF_COMPARISONS]
        if key not in keys
    ]
    assert stale == [], (
        f"drop these from the lists of reviewed exceptions, their tests are gone: {stale}"
    )


def test_no_test_asserts_only_where_it_may_never_get() -> None:
    found = conditional_only(functions())
    assert found == [], (
        "these tests assert only inside loops over computed collections, `if`s without "
        "`else` or `except`s: assert first that the loop has something to go over (or list "
        "the test in CONDITIONAL_ONLY with the reason): " + "; ".join(found)
    )


def test_no_assert_compares_a_thing_with_itself() -> None:
    found = self_comparisons(functions())
    assert found == [], "compare with an independent expectation: " + "; ".join(found)


def test_the_checks_find_what_they_look_for() -> None:
    # the checks on a made-up file: each kind of mistake is found, and the right forms are not
    source = """
import pytest
ITEMS = ("a", "b")
def test_bare():
    with pytest.raises(ValueError):
        int("x")
def test_matched():
    with pytest.raises(ValueError, match="invalid literal"):
        int("x")
def test_glob(tmp_path):
    for path in tmp_path.glob("*.txt"):
        assert path.read_text()
def test_glob_checked(tmp_path):
    paths = list(tmp_path.glob("*.txt"))
    assert paths
    for path in paths:
        assert path.read_text()
def test_constant_loop():
    for item in ITEMS:
        assert item
def test_if_only(value=1):
    if value:
        assert value == 1
def test_if_else(value=1):
    if value:
        assert value == 1
    else:
        assert value == 0
def test_self():
    x = 1
    assert x == x
"""
    made = list(functions_of(source, "t.py"))
    assert raises_without_match(made) == ["t.py:5 (test_bare)"]
    assert conditional_only(made) == ["t.py:10 (test_glob)", "t.py:21 (test_if_only)"]
    assert self_comparisons(made) == ["t.py:31 (x == x)"]
