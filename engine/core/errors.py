"""One root error; each class says how it is shown, in one table read by the CLI and the server.

`exit_code` is the CLI's exit status (engine/cli/__init__.py, the one boundary for errors),
`http_status` and `code` the server's answer (engine/serve/problems.py: `{"error": {"code", "message"}}`).
A subclass that says nothing inherits its parent's row. Exit codes: 1 a failure, 2 a usage error
(3 a paused run and 4 an internal error are not errors of this kind; docs/cli.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from engine.core.diagnostics import Diagnostic


class BlockyardError(Exception):
    """An expected failure that the CLI shows as one clear message (exit 1)."""

    exit_code: ClassVar[int] = 1
    # over HTTP an engine failure that no request caused: the server's own problem
    http_status: ClassVar[int] = 500
    code: ClassVar[str] = "engine_error"


class UsageError(BlockyardError):
    """Wrong command-line usage, unknown names given by the user (exit 2); over HTTP a request the
    engine refuses (422)."""

    exit_code = 2
    http_status = 422
    code = "invalid_request"


class ValidationFailed(BlockyardError):
    """Definitions did not validate; carries every diagnostic."""

    code = "validation_failed"

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity == "error"]
        lines = [d.format() for d in errors[:20]]
        if len(errors) > 20:
            lines.append(f"... and {len(errors) - 20} more")
        super().__init__("\n".join(lines) or "validation failed")


class RunError(BlockyardError):
    """A run failed; the message names the flow, step and reason."""

    code = "run_failed"
