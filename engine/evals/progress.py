"""The progress of `blockyard eval` on stderr: on a terminal, one bar redrawn in place (cases done of all,
failures, cost so far, elapsed time) at most ten times a second; elsewhere (CI logs, pipes) one line per
eval as its last case ends. Stdout keeps the results only (the table, or --json).
"""

from __future__ import annotations

import os
import time
from typing import TextIO

from engine.core.usage import Spend
from engine.evals.results import CaseResult

WIDTH = 24  # characters of the bar
REDRAW = 0.1  # seconds between redraws


class Progress:
    def __init__(
        self,
        stream: TextIO,
        total: int,
        *,
        live: bool | None = None,
        per_eval: dict[str, int] | None = None,
    ) -> None:
        self.stream = stream
        self.total = total
        self.live = stream.isatty() if live is None else live
        self.colour = self.live and "NO_COLOR" not in os.environ
        self.done = 0
        self.failed = 0
        self.spend = Spend()
        self.began = time.monotonic()
        self._drawn = 0.0
        self._left = dict(per_eval or {})  # cases still to run, per eval (and side)
        self._failed: dict[str, int] = {}
        self._bar = "█" if _fits(stream, "█░") else "#"
        self._empty = "░" if self._bar == "█" else "-"

    def case(self, key: str, result: CaseResult) -> None:
        """A case of eval (and side) `key` ended."""
        self.done += 1
        self.failed += not result.passed
        self.spend.merge(result.spend)
        self.spend.merge(result.judge_spend)
        if not result.passed:
            self._failed[key] = self._failed.get(key, 0) + 1
        if self.live:
            now = time.monotonic()
            if now - self._drawn >= REDRAW or self.done == self.total:
                self._drawn = now
                self._draw()
            return
        left = self._left.get(key)
        if left is not None:
            self._left[key] = left - 1
            if left == 1:
                failed = self._failed.get(key, 0)
                self.stream.write(
                    f"{key}: done ({self.done}/{self.total} cases"
                    f"{f', {failed} failed' if failed else ''})\n"
                )
                self.stream.flush()

    def start(self) -> None:
        if self.live and self.total:
            self._draw()

    def finish(self) -> None:
        if self.live and self.total:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        share = self.done / self.total if self.total else 1.0
        filled = int(share * WIDTH)
        bar = self._bar * filled + self._empty * (WIDTH - filled)
        failed = f" · {self.failed} failed" if self.failed else ""
        if failed and self.colour:
            failed = f" · \033[31m{self.failed} failed\033[0m"
        elapsed = time.monotonic() - self.began
        self.stream.write(
            f"\r\033[K{bar} {self.done}/{self.total} cases{failed} · {self.spend.cost_text()} · "
            f"{elapsed:.1f} s"
        )
        self.stream.flush()


def _fits(stream: TextIO, text: str) -> bool:
    try:
        text.encode(stream.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True
