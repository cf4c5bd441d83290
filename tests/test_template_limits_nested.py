"""A template's result is refused when an integer anywhere in it is outside what the run's state can
hold (msgpack: INT64_MIN to UINT64_MAX), however deep it sits and in whatever container: a dict's
values and keys, a list, a tuple, a set, a frozenset (engine/templates/limits.py, `Budget.stored`).
Integers inside the range are kept, at the very edges too."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.templates.limits import DEFAULT, INT64_MIN, UINT64_MAX, Budget, LimitExceeded

IN_RANGE = st.one_of(
    st.integers(INT64_MIN, UINT64_MAX), st.sampled_from([INT64_MIN, UINT64_MAX, 0, -1])
)
OUT_OF_RANGE = st.one_of(
    st.integers(max_value=INT64_MIN - 1),
    st.integers(min_value=UINT64_MAX + 1),
    st.sampled_from([INT64_MIN - 1, UINT64_MAX + 1, -(2**200), 2**200]),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), IN_RANGE, st.text(max_size=5), st.floats(allow_nan=False)
)
# what can be a dict key or a set member: scalars, tuples and frozensets of them
HASHABLE = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
    max_leaves=6,
)
# a value a template may build, every integer in it within the range
GOOD = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(HASHABLE, inner, max_size=3),
        st.sets(HASHABLE, max_size=3),
        st.frozensets(HASHABLE, max_size=3),
    ),
    max_leaves=12,
)
WRAPPERS = ("list", "tuple", "dict value", "dict key", "set", "frozenset")


def stored(value: Any) -> Any:
    return Budget(DEFAULT).stored(value)


def hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def wrapped(data: st.DataObject, value: Any, how: str) -> Any:
    """`value` placed among in-range siblings in a container of kind `how`."""
    if how in ("list", "tuple"):
        items = data.draw(st.lists(GOOD if how == "list" else HASHABLE, max_size=3))
        items.insert(data.draw(st.integers(0, len(items))), value)
        return items if how == "list" else tuple(items)
    if how in ("set", "frozenset"):
        members = data.draw(st.sets(HASHABLE, max_size=3)) | {value}
        return members if how == "set" else frozenset(members)
    pairs = data.draw(st.dictionaries(HASHABLE, GOOD, max_size=3))
    if how == "dict key":
        pairs[value] = data.draw(GOOD)
    else:
        pairs[data.draw(HASHABLE.filter(lambda key: key not in pairs))] = value
    return pairs


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.data())
def test_an_integer_out_of_range_anywhere_is_refused(data: st.DataObject) -> None:
    bad = data.draw(OUT_OF_RANGE, label="out of range")
    value: Any = bad
    for _ in range(data.draw(st.integers(0, 6), label="depth")):
        # a set member or a dict key must be hashable: a tuple or frozenset around it keeps it so
        kinds = WRAPPERS if hashable(value) else ("list", "tuple", "dict value")
        value = wrapped(data, value, data.draw(st.sampled_from(kinds), label="container"))
    with pytest.raises(LimitExceeded, match="outside the 64-bit integer range"):
        stored(value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GOOD)
def test_integers_in_range_are_kept_wherever_they_are(value: Any) -> None:
    assert stored(value) is value


# each container kind once, for certain (the property above finds them, these never miss one)
@pytest.mark.parametrize("bad", [INT64_MIN - 1, UINT64_MAX + 1])
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda n: n, id="bare"),
        pytest.param(lambda n: {"a": n}, id="dict-value"),
        pytest.param(lambda n: {n: "a"}, id="dict-key"),
        pytest.param(lambda n: {"a": {"b": [1, {"c": n}]}}, id="deep-dict-value"),
        pytest.param(lambda n: [{"x": 1}, {(1, n): 2}], id="deep-dict-key-in-a-tuple"),
        pytest.param(lambda n: [0, n], id="list"),
        pytest.param(lambda n: (0, n), id="tuple"),
        pytest.param(lambda n: {0, n}, id="set"),
        pytest.param(lambda n: frozenset({0, n}), id="frozenset"),
        pytest.param(lambda n: [[[(frozenset({n}),)]]], id="frozenset-in-a-tuple-in-lists"),
    ],
)
def test_each_container_kind(build: Any, bad: int) -> None:
    with pytest.raises(LimitExceeded, match="outside the 64-bit integer range"):
        stored(build(bad))
    assert stored(build(INT64_MIN)) is not None and stored(build(UINT64_MAX)) is not None


def test_the_audit_probe() -> None:
    """The value the audit's probe showed accepted when dict values were skipped."""
    with pytest.raises(LimitExceeded, match="outside the 64-bit integer range"):
        stored({"a": -(2**63) - 1})
