"""Structured server logs: one `key=value` line per event, on stderr.

Callers pass fields explicitly (`log.info("run_finished", extra=fields(run=..., ms=...))`), so
nothing reaches the log by accident: no request headers, no inputs, no secrets (and the API keys
of the yard's model profiles are masked in every line, should an error message quote one). The handler is
installed by `blockyard serve` only; importing this module changes no logger.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from engine.core.redaction import KNOWN

LOGGER = "blockyard.serve"
_FIELDS = "kv"


def get_logger() -> logging.Logger:
    return logging.getLogger(LOGGER)


def fields(**values: Any) -> dict[str, Any]:
    """`extra=` for a log call: the key=value pairs of the line."""
    return {_FIELDS: values}


def _quote(value: Any) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\n\t'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class KeyValueFormatter(logging.Formatter):
    """`time=... level=info event=reload flows=3 ms=41`."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z"
        )
        parts = [
            f"time={stamp}",
            f"level={record.levelname.lower()}",
            f"event={_quote(record.getMessage())}",
        ]
        for key, value in getattr(record, _FIELDS, {}).items():
            if value is not None:
                parts.append(f"{key}={_quote(value)}")
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            parts.append(f"error={_quote(f'{type(exc).__name__}: {exc}')}")
        # an error may quote a model's reply, and with it an API key
        return KNOWN.text(" ".join(parts))


def configure(level: int = logging.INFO) -> None:
    """Send blockyard.serve (and uvicorn's error log) to stderr as key=value lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    for name in (LOGGER, "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
