"""`blockyard memory list|get|set|delete SCOPE [KEY] [VALUE]`: look at and fix memory by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from engine.dbfile import exists
from engine.errors import UsageError
from engine.load import parse_value
from engine.memory.scope import parse_scope, preferences_namespace
from engine.memory.store import LIST_LIMIT, open_store, preferences


def state_path(root: Path) -> Path:
    from engine.project import load_project

    return root / load_project(root).config.paths.state


def memory_command(root: Path, action: str, scope: str, key: str | None, value: str | None,
                   as_json: bool) -> int:
    parse_scope(scope)
    path = state_path(root)
    if action != "set" and not exists(path):
        raise UsageError(f"no state database at {path}: nothing has been remembered yet")
    with open_store(path) as store:
        if action == "list":
            prefs = preferences(store, scope)
            _show(prefs, as_json, empty=f"no preferences in scope '{scope}'")
            histories = store.search(parse_scope(scope), limit=LIST_LIMIT)
            runs = [item for item in histories if "history" in item.namespace]
            if runs and not as_json:
                flows = sorted({item.namespace[-2] for item in runs})
                click.echo(f"history: {len(runs)} run(s) of {', '.join(flows)}", err=True)
            return 0
        if key is None:
            raise UsageError(f"`blockyard memory {action}` needs a KEY")
        namespace = preferences_namespace(scope)
        if action == "get":
            item = store.get(namespace, key)
            if item is None:
                raise UsageError(f"no preference '{key}' in scope '{scope}'")
            # the value as JSON, one line, with or without --json: what `set` takes back (YAML 1.2 reads JSON)
            click.echo(json.dumps(item.value.get("value"), ensure_ascii=False, default=str))
            return 0
        if action == "set":
            if value is None:
                raise UsageError("`blockyard memory set` needs a VALUE (read as YAML: 7, [a, b], text)")
            store.put(namespace, key, {"value": parse_value(value)})
            click.echo(f"set {scope} {key}")
            return 0
        if action == "delete":
            if store.get(namespace, key) is None:
                raise UsageError(f"no preference '{key}' in scope '{scope}'")
            store.delete(namespace, key)
            click.echo(f"deleted {scope} {key}")
            return 0
    raise UsageError(f"unknown memory action '{action}' (use list, get, set or delete)")


def _show(prefs: dict[str, Any], as_json: bool, empty: str) -> None:
    """`list`: a preference a line (KEY  JSON value), or one JSON object with --json."""
    if as_json:
        click.echo(json.dumps(prefs, ensure_ascii=False, default=str))
        return
    if not prefs:
        click.echo(empty, err=True)
    width = max((len(k) for k in prefs), default=0)
    for key, item in prefs.items():
        click.echo(f"{key.ljust(width)}  {json.dumps(item, ensure_ascii=False, default=str)}")
