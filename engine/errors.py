"""One root error; each subclass knows its exit code (see cli.py for the boundary)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.diagnostics import Diagnostic


class BlockyardError(Exception):
    """An expected failure that the CLI shows as one clear message (exit 1)."""

    exit_code = 1


class UsageError(BlockyardError):
    """Wrong command-line usage, unknown names given by the user (exit 2)."""

    exit_code = 2


class ValidationFailed(BlockyardError):
    """Definitions did not validate; carries every diagnostic."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity == "error"]
        lines = [d.format() for d in errors[:20]]
        if len(errors) > 20:
            lines.append(f"... and {len(errors) - 20} more")
        super().__init__("\n".join(lines) or "validation failed")


class RunError(BlockyardError):
    """A run failed; the message names the flow, step and reason."""
