"""Run ids: short, sortable by creation time, unique without coordination."""

from __future__ import annotations

import re
import secrets
import threading
import time

from engine.core.errors import UsageError

# Crockford's base32, lower case: its digits sort in ASCII order, and it has no i, l, o, u
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_RANDOM_BITS = 25
_lock = threading.Lock()
_last = (0, 0)


def _base32(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_run_id() -> str:
    """14 characters: milliseconds since 1970 (9 chars, good until the year 3084) + 25 bits.

    Ids sort in the order they were made, so `ORDER BY id` is time order. Within one process
    ids made in the same millisecond count up from a random start (never equal); between
    processes the random part makes a clash unlikely, and the runs table's key catches it.
    """
    global _last
    with _lock:
        now = time.time_ns() // 1_000_000
        last_ms, last_tail = _last
        if now > last_ms:
            ms, tail = (
                now,
                secrets.randbits(_RANDOM_BITS - 1),
            )  # room to count up within the millisecond
        elif last_tail + 1 < 2**_RANDOM_BITS:  # same millisecond, or the clock stepped back
            ms, tail = last_ms, last_tail + 1
        else:
            ms, tail = last_ms + 1, secrets.randbits(_RANDOM_BITS - 1)
        _last = (ms, tail)
    return _base32(ms, 9) + _base32(tail, 5)


def check_run_id(run_id: str) -> str:
    """A user-chosen id: letters, digits, `_`, `.`, `-`; at most 64 characters."""
    if not _RUN_ID.fullmatch(run_id):  # not match(...$): `$` also matches before a final newline
        raise UsageError(
            f"invalid run id '{run_id}': use up to 64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return run_id
