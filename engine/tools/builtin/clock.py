"""current_time: the current date and time in a timezone."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from engine.core.diagnostics import did_you_mean
from engine.core.values import JsonDict
from engine.tools.errors import ToolError
from engine.tools.tool import Tool

PARAMETERS: JsonDict = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": ["string", "null"],
            "description": "IANA timezone name, e.g. Europe/Paris (default UTC).",
        },
    },
    "additionalProperties": False,
}


def current_time(timezone: str | None = None) -> dict[str, str]:
    """Return {"now": ISO-8601 time with offset, "timezone": name}."""
    name = timezone or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"tool 'current_time': unknown timezone '{name}'"
            f"{did_you_mean(name, available_timezones())}"
        ) from None
    return {"now": datetime.now(zone).isoformat(timespec="seconds"), "timezone": name}


def tool() -> Tool:
    return Tool(
        name="current_time",
        description="The current date and time (ISO 8601) in a timezone.",
        parameters=PARAMETERS,
        func=current_time,
    )
