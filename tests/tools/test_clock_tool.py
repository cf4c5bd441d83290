"""current_time: ISO-8601 now, in UTC or an IANA timezone."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ConfigSpec
from engine.tools import ToolError, build_registry


def now(tmp_path: Path, **args: Any) -> Any:
    return asyncio.run(build_registry(ConfigSpec(), tmp_path).call("current_time", args))


def test_default_is_utc(tmp_path: Path) -> None:
    result = now(tmp_path)
    assert result["timezone"] == "UTC"
    assert datetime.fromisoformat(result["now"]).utcoffset() == timedelta(0)


def test_named_timezone(tmp_path: Path) -> None:
    result = now(tmp_path, timezone="Asia/Kolkata")
    assert result["timezone"] == "Asia/Kolkata"
    assert datetime.fromisoformat(result["now"]).utcoffset() == timedelta(hours=5, minutes=30)


def test_unknown_timezone_suggests_one(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="unknown timezone 'Europe/Pariss'") as caught:
        now(tmp_path, timezone="Europe/Pariss")
    assert (
        str(caught.value)
        == "tool 'current_time': unknown timezone 'Europe/Pariss' (did you mean 'Europe/Paris'?)"
    )
