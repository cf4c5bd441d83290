"""Sets of dataflow facts ("c:<key>", "s:<id>") stored as bitsets over one flow's table of facts.

A step's facts name every step before it, so on a flow of n steps each set holds O(n) facts
and the analyses combine them once per edge. As frozensets of strings that made dense `needs:`
quadratic in practice (a union or intersection per edge, each O(n) Python objects); as
integers each combination is a handful of machine words.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from engine.validate.semantic.graph import bits


class FactTable:
    """The facts of one flow, each given a bit when first seen."""

    def __init__(self) -> None:
        self.bit: dict[str, int] = {}
        self.names: list[str] = []

    def of(self, facts: Iterable[str]) -> Facts:
        mask = 0
        for fact in facts:
            position = self.bit.get(fact)
            if position is None:
                position = self.bit[fact] = len(self.names)
                self.names.append(fact)
            mask |= 1 << position
        return Facts(mask, self)


class Facts:
    """An immutable set of facts: supports `in`, iteration, `|`, `&`, `==`, `len`."""

    __slots__ = ("mask", "table")

    def __init__(self, mask: int, table: FactTable | None) -> None:
        self.mask = mask
        self.table = table

    def __contains__(self, fact: object) -> bool:
        if self.table is None or not isinstance(fact, str):
            return False
        position = self.table.bit.get(fact)
        return position is not None and bool(self.mask >> position & 1)

    def __iter__(self) -> Iterator[str]:
        if self.table is not None:
            names = self.table.names
            for position in bits(self.mask):
                yield names[position]

    def __len__(self) -> int:
        return self.mask.bit_count()

    def __or__(self, other: Facts) -> Facts:
        return Facts(self.mask | other.mask, self.table if self.table is not None else other.table)

    def __and__(self, other: Facts) -> Facts:
        return Facts(self.mask & other.mask, self.table if self.table is not None else other.table)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Facts):
            return self.mask == other.mask
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.mask)

    def __repr__(self) -> str:
        return f"Facts({sorted(self)!r})"


NOTHING = Facts(0, None)
