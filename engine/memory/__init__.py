"""Long-term memory across runs: LangGraph's SQLite store, in the yard's state database.

A flow's `memory: {scope: "users/{{ inputs.user_id }}"}` renders to a scope such as
`users/ada`; preferences live under `(users, ada, preferences)` and the history of a flow's
runs under `(users, ada, flows, <flow>, history)` (DESIGN.md §5).
"""

from __future__ import annotations

from engine.memory.scope import history_namespace, parse_scope, preferences_namespace

__all__ = ["history_namespace", "parse_scope", "preferences_namespace"]
