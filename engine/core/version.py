"""The engine's version (what `blockyard --version` shows comes from the installed package)."""

from __future__ import annotations

__version__ = "0.1.0"
