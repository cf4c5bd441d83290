"""Run ids: short, sortable by creation time, unique without coordination."""

from __future__ import annotations

import re
import secrets
import time

from engine.errors import UsageError

# Crockford's base32, lower case: its digits sort in ASCII order, and it has no i, l, o, u
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _base32(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_run_id() -> str:
    """13 characters: milliseconds since 1970 (9 chars, good until the year 3084) + 20 random bits.

    Ids made later sort after earlier ones (to the millisecond), so `ORDER BY id` is time order.
    """
    return _base32(time.time_ns() // 1_000_000, 9) + _base32(secrets.randbits(20), 4)


def check_run_id(run_id: str) -> str:
    """A user-chosen id: letters, digits, `_`, `.`, `-`; at most 64 characters."""
    if not _RUN_ID.match(run_id):
        raise UsageError(f"invalid run id '{run_id}': use up to 64 letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")
    return run_id
