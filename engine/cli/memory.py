"""`blockyard memory list|get|set|delete SCOPE [KEY] [VALUE]`: look at and fix memory by hand."""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.cli.options import ROOT_OPTION, Command, root_of, state_location
from engine.core.errors import UsageError
from engine.core.values import JsonDict, ValueDomainError
from engine.definitions.load import parse_value
from engine.state.database import exists


def memory_command(
    root: Path, action: str, scope: str, key: str | None, value: str | None, as_json: bool
) -> int:
    # LangGraph's store: imported when this command runs, not by the CLI's light commands
    from engine.state.memory import (
        LIST_LIMIT,
        get_preference,
        is_empty,
        open_store,
        parse_scope,
        preferences,
        preferences_namespace,
        set_preference,
    )

    parse_scope(scope)
    location = state_location(root)
    if action != "set" and location.url is None and not exists(location.path):
        # a look never creates the file
        raise UsageError(f"no state database at {location}: nothing has been remembered yet")
    with open_store(location) as store:
        if action != "set" and is_empty(store):  # the same answer on either backend
            raise UsageError(
                f"the state database {location} holds no memory: nothing has been remembered yet"
            )
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
            found, remembered = get_preference(store, scope, key)
            if not found:
                raise UsageError(f"no preference '{key}' in scope '{scope}'")
            # the value as JSON, one line, with or without --json: what `set` takes back (YAML 1.2 reads JSON)
            click.echo(json.dumps(remembered, ensure_ascii=False, default=str))
            return 0
        if action == "set":
            if value is None:
                raise UsageError(
                    "`blockyard memory set` needs a VALUE (read as YAML: 7, [a, b], text)"
                )
            try:
                parsed = parse_value(value)
            except (
                ValueDomainError
            ) as exc:  # e.g. an integer beyond 64 bits: no flow could read it back
                raise UsageError(f"memory set {key}: {exc}") from None
            set_preference(store, scope, key, parsed)
            click.echo(f"set {scope} {key}")
            return 0
        if action == "delete":
            if store.get(namespace, key) is None:
                raise UsageError(f"no preference '{key}' in scope '{scope}'")
            store.delete(namespace, key)
            click.echo(f"deleted {scope} {key}")
            return 0
    raise UsageError(f"unknown memory action '{action}' (use list, get, set or delete)")


def _show(prefs: JsonDict, as_json: bool, empty: str) -> None:
    """`list`: a preference a line (KEY  JSON value), or one JSON object with --json."""
    if as_json:
        click.echo(json.dumps(prefs, ensure_ascii=False, default=str))
        return
    if not prefs:
        click.echo(empty, err=True)
    width = max((len(k) for k in prefs), default=0)
    for key, item in prefs.items():
        click.echo(f"{key.ljust(width)}  {json.dumps(item, ensure_ascii=False, default=str)}")


# ---- the commands ---------------------------------------------------------------------------------


@click.command("memory", cls=Command)
@click.argument("action", type=click.Choice(["list", "get", "set", "delete"]))
@click.argument("scope")
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@ROOT_OPTION
def memory(
    action: str, scope: str, key: str | None, value: str | None, as_json: bool, root: Path | None
) -> None:
    """Look at and fix long-term memory: list|get|set|delete SCOPE [KEY] [VALUE]."""
    raise SystemExit(memory_command(root_of(root), action, scope, key, value, as_json))
