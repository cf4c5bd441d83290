"""Semantic checks over a loaded project (DESIGN.md §4.3). Filled in by the semantic-checks work."""

from __future__ import annotations

from engine.diagnostics import Diagnostic
from engine.project import Project


def check_project(project: Project) -> list[Diagnostic]:
    """Every semantic problem of every flow and block of the project."""
    return []
