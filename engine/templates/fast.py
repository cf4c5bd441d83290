"""The fast path of template expressions: the simple ones compiled once to Python closures.

Most expressions a flow evaluates at every step are tiny — `n + 1`, `inputs.a`, `context.items[0]`,
`context.verdict == 'pass'` — and rendering them through Jinja costs a new context and a generator
each time, tens of microseconds for one addition. An expression made only of the forms below is
compiled here, once per source string, into nested closures that do what the code Jinja generates
for it does, through the same hooks of the same environment:

- a name: the scope, then the environment's globals, else the environment's `undefined(name=...)`
  (StrictUndefined: the same error, raised where Jinja raises it);
- constants, after Jinja's own constant folding (its `Optimizer`, run on the expression as its code
  generator runs it); a folded list, tuple or dict is built anew for each call, as Jinja's code does;
- `a.b` and `a[b]`: the environment's `getattr` / `getitem` (the sandbox's: data keys first, hidden
  and unsafe attributes refused exactly as in a template);
- `+ - * / // % **`: the sandbox's intercepted binary operators, i.e. engine/templates/checks.py's
  `binop` with the evaluation's budget (sizes refused before they are computed);
- comparisons (chained as in Python), `in`, `not in`, `and`, `or`, `not`, unary `-` and `+`,
  `a if c else b`, `~` (the environment's measured join), list, tuple and dict literals.

Anything else (filters, tests, calls, slices, an `if` without `else`, names with a meaning of their
own in Jinja such as `self` or `loop`) returns None from `compile_fast`: the caller uses Jinja.

Text templates (prompts, messages, mixed bindings) take the same path when they are only text and
`{{ expr }}` of those forms, no `{% %}` tags (`compile_fast_text`): each expression's value goes
through the environment's `finalize` and `str`, and the parts through its measured `concat`, as
the code Jinja generates for an `Output` node does. The results and errors are Jinja's
(tests/test_template_fast.py checks them against Jinja on a corpus and on generated templates).
Imports nothing heavier than jinja2.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jinja2 import nodes
from jinja2.optimizer import Optimizer
from jinja2.parser import Parser

from engine.templates.checks import binop
from engine.templates.limits import Budget
from engine.templates.sandbox import BoundedEnvironment

Scope = Mapping[str, Any]
Eval = Callable[[Scope, Budget], Any]

_MISSING: Any = object()
# Names the code generator gives a meaning of their own (TemplateReference, loop and macro variables).
_SPECIAL_NAMES = frozenset({"self", "loop", "caller", "varargs", "kwargs", "super"})
_SCALARS = (str, int, float, bool, type(None))
_ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "%", "**"})

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "gt": lambda a, b: a > b,
    "gteq": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lteq": lambda a, b: a <= b,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}


class FastExpression:
    """An expression compiled to a closure; `calls` counts its evaluations (proof the fast path ran)."""

    __slots__ = ("_run", "calls", "source")

    def __init__(self, source: str, run: Eval) -> None:
        self.source = source
        self.calls = 0
        self._run = run

    def __call__(self, scope: Scope, budget: Budget) -> Any:
        """The expression's value in `scope`; `budget` must be the evaluation's current one (`begin()`)."""
        self.calls += 1
        return self._run(scope, budget)


class FastText:
    """A text template compiled to its parts: literal text, or an expression's closure."""

    __slots__ = ("_env", "_parts", "calls", "source")

    def __init__(
        self, source: str, parts: list[tuple[str, Eval | None]], env: BoundedEnvironment
    ) -> None:
        self.source = source
        self.calls = 0
        self._parts = parts
        self._env = env

    def __call__(self, scope: Scope, budget: Budget) -> str:
        """The rendered text; `budget` must be the render's current one (`begin()`)."""
        self.calls += 1
        text: str = self._env.concat(self._pieces(scope, budget))
        return text

    def _pieces(self, scope: Scope, budget: Budget) -> Iterator[str]:
        # a generator, as Jinja's render function is: the concat measures the text as it is produced,
        # so a text over the limit fails before the expressions after it are evaluated
        finalize = self._env.finalize
        assert finalize is not None
        for text, run in self._parts:
            yield text if run is None else str(finalize(run(scope, budget)))


class _NotFast(Exception):
    """A form outside the fast path's subset: Jinja evaluates the expression."""


def compile_fast(source: str, env: BoundedEnvironment) -> FastExpression | None:
    """The fast form of expression `source`, or None when Jinja must evaluate it (or it does not
    parse: Jinja's compile reports that)."""
    try:
        parser = Parser(env, source, state="variable")  # as Environment.compile_expression parses
        expr = parser.parse_expression()
        if not parser.stream.eos:
            return None
        expr.set_environment(env)
        folded = Optimizer(env).visit(expr, nodes.EvalContext(env))  # Jinja's constant folding
        return FastExpression(source, _compile(folded, env))
    except _NotFast:
        return None
    # a syntax error (or a literal Python refuses): the Jinja path raises it properly
    except Exception:
        return None


def compile_fast_text(source: str, env: BoundedEnvironment) -> FastText | None:
    """The fast form of text template `source`, or None when Jinja must render it (any tag, a form
    outside the subset, a constant that is not a scalar, or a syntax error: Jinja reports that)."""
    try:
        template = env.parse(source)
        parts: list[tuple[str, Eval | None]] = []
        for output in template.body:
            if not isinstance(output, nodes.Output):
                return None
            for child in output.nodes:
                if isinstance(child, nodes.TemplateData):
                    parts.append((child.data, None))  # newlines already normalized by the lexer
                    continue
                child.set_environment(env)
                folded = Optimizer(env).visit(child, nodes.EvalContext(env))
                if isinstance(folded, nodes.Const):
                    # Jinja finalizes constants while it compiles; for a scalar that is just str()
                    if type(folded.value) not in _SCALARS:
                        return None
                    parts.append((str(folded.value), None))
                    continue
                parts.append(("", _compile(folded, env)))
        return FastText(source, parts, env)
    except _NotFast:
        return None
    # a syntax error (or a literal Python refuses): the Jinja path raises it properly
    except Exception:
        return None


def _compile(node: nodes.Node, env: BoundedEnvironment) -> Eval:
    if isinstance(node, nodes.Const):
        return _const(node.value)
    if isinstance(node, nodes.Name) and node.ctx == "load" and node.name not in _SPECIAL_NAMES:
        return _name(node.name, env)
    if isinstance(node, nodes.Getattr) and node.ctx == "load":
        return _getattr(_compile(node.node, env), node.attr, env)
    if (
        isinstance(node, nodes.Getitem)
        and node.ctx == "load"
        and not isinstance(node.arg, nodes.Slice)
    ):
        return _getitem(_compile(node.node, env), _compile(node.arg, env), env)
    if isinstance(node, nodes.And):
        return _and(_compile(node.left, env), _compile(node.right, env))
    if isinstance(node, nodes.Or):
        return _or(_compile(node.left, env), _compile(node.right, env))
    if (
        isinstance(node, nodes.BinExpr)
        and node.operator in _ARITHMETIC
        and node.operator in env.intercepted_binops
    ):
        return _binop(node.operator, _compile(node.left, env), _compile(node.right, env))
    if isinstance(node, nodes.UnaryExpr) and node.operator not in env.intercepted_unops:
        return _unary(node.operator, _compile(node.node, env))
    if isinstance(node, nodes.Compare):
        return _compare(
            _compile(node.expr, env), [(op.op, _compile(op.expr, env)) for op in node.ops]
        )
    if isinstance(node, nodes.CondExpr) and node.expr2 is not None:
        return _cond(_compile(node.test, env), _compile(node.expr1, env), _compile(node.expr2, env))
    if isinstance(node, nodes.Concat):
        return _concat([_compile(part, env) for part in node.nodes], env)
    if isinstance(node, nodes.List):
        return _list([_compile(item, env) for item in node.items])
    if isinstance(node, nodes.Tuple) and node.ctx == "load":
        return _tuple([_compile(item, env) for item in node.items])
    if isinstance(node, nodes.Dict):
        return _dict([(_compile(pair.key, env), _compile(pair.value, env)) for pair in node.items])
    raise _NotFast()


# ---- the closures --------------------------------------------------------------------------------
# Each mirrors what jinja2.compiler.CodeGenerator writes for its node, in the same order of evaluation.


def _const(value: Any) -> Eval:
    if type(value) in _SCALARS:
        return lambda scope, budget: value
    # a folded container: Jinja's code writes its repr, so every evaluation builds a new one
    return lambda scope, budget: copy.deepcopy(value)


def _name(name: str, env: BoundedEnvironment) -> Eval:
    globals_ = env.globals
    undefined = env.undefined

    def load(scope: Scope, budget: Budget) -> Any:
        value = scope.get(name, _MISSING)
        if value is _MISSING:
            # Jinja's context: the render's variables over the environment's globals
            value = globals_.get(name, _MISSING)
            if value is _MISSING:
                return undefined(name=name)
        return value

    return load


def _getattr(obj: Eval, attribute: str, env: BoundedEnvironment) -> Eval:
    lookup = env.getattr

    def get(scope: Scope, budget: Budget) -> Any:
        value = obj(scope, budget)
        if type(value) is dict and attribute in value:
            # BoundedEnvironment.getattr's first case, inlined
            return value[attribute]
        return lookup(value, attribute)

    return get


def _getitem(obj: Eval, arg: Eval, env: BoundedEnvironment) -> Eval:
    lookup = env.getitem

    def get(scope: Scope, budget: Budget) -> Any:
        value = obj(scope, budget)
        key = arg(scope, budget)
        if type(value) is dict or type(value) is list:
            # the sandbox's getitem tries this first, too
            try:
                return value[key]
            except (TypeError, LookupError):
                pass
        return lookup(value, key)

    return get


def _binop(operator: str, left: Eval, right: Eval) -> Eval:
    def compute(scope: Scope, budget: Budget) -> Any:
        a = left(scope, budget)
        return binop(budget, operator, a, right(scope, budget))  # = BoundedEnvironment.call_binop

    return compute


def _and(left: Eval, right: Eval) -> Eval:
    def both(scope: Scope, budget: Budget) -> Any:
        value = left(scope, budget)
        return right(scope, budget) if value else value

    return both


def _or(left: Eval, right: Eval) -> Eval:
    def either(scope: Scope, budget: Budget) -> Any:
        value = left(scope, budget)
        return value if value else right(scope, budget)

    return either


def _unary(operator: str, operand: Eval) -> Eval:
    if operator == "not":
        return lambda scope, budget: not operand(scope, budget)
    if operator == "-":
        return lambda scope, budget: -operand(scope, budget)
    if operator == "+":
        return lambda scope, budget: +operand(scope, budget)
    raise _NotFast()


def _compare(first: Eval, rest: list[tuple[str, Eval]]) -> Eval:
    ops = [(_COMPARE[op], operand) for op, operand in rest]
    if len(ops) == 1:
        test, second = ops[0]
        return lambda scope, budget: test(first(scope, budget), second(scope, budget))

    def chained(
        scope: Scope, budget: Budget
    ) -> Any:  # `a < b < c`: Python's chain, b evaluated once
        value = first(scope, budget)
        result: Any = True
        for test, operand in ops:
            following = operand(scope, budget)
            result = test(value, following)
            if not result:
                return result
            value = following
        return result

    return chained


def _cond(test: Eval, then: Eval, otherwise: Eval) -> Eval:
    return lambda scope, budget: (
        then(scope, budget) if test(scope, budget) else otherwise(scope, budget)
    )


def _concat(parts: list[Eval], env: BoundedEnvironment) -> Eval:
    joined = env.joined
    return lambda scope, budget: joined(tuple(part(scope, budget) for part in parts))


def _list(items: list[Eval]) -> Eval:
    return lambda scope, budget: [item(scope, budget) for item in items]


def _tuple(items: list[Eval]) -> Eval:
    return lambda scope, budget: tuple([item(scope, budget) for item in items])


def _dict(pairs: list[tuple[Eval, Eval]]) -> Eval:
    def build(scope: Scope, budget: Budget) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key, value in pairs:
            k = key(scope, budget)
            result[k] = value(scope, budget)
        return result

    return build
