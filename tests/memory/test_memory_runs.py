"""Memory across runs: the flow's scope, memory_read/memory_write blocks, the built-in
query_memory/save_to_memory blocks, prompts that see user_preferences/user_history, and one
history record per run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import Yard
from engine.definitions.project import load_project
from engine.models import MockScript, StructuredRequest, scripted
from engine.state.location import locate
from engine.state.memory import history, open_store, preferences
from tests.support.cli import Cli

REPO = Path(__file__).resolve().parents[2]

BLOCKS = {
    "blocks/read_lunch.yaml": """
        block: read_lunch
        kind: memory_read
        memory: {namespace: preferences, key: lunch}
        outputs: {lunch: {type: any}}
    """,
    "blocks/read_parts.yaml": """
        block: read_parts
        kind: memory_read
        memory: {namespace: preferences, key: "{{ name }}"}
        inputs: {name: {type: string}}
        outputs: {restaurant: {type: string, default: none}, dish: {type: string, default: none}}
    """,
    "blocks/write_lunch.yaml": """
        block: write_lunch
        kind: memory_write
        memory: {namespace: preferences, key: lunch}
        inputs: {restaurant: {type: string}, dish: {type: string}}
    """,
    "blocks/note_history.yaml": """
        block: note_history
        kind: memory_write
        memory: {namespace: history}
        inputs: {note: {type: string}}
    """,
    "blocks/past.yaml": """
        block: past
        kind: memory_read
        memory: {namespace: history}
        inputs: {query: {type: string, default: ""}}
        outputs: {runs: {type: array}}
    """,
    "blocks/suggest.yaml": """
        block: suggest
        kind: llm
        inputs: {day: {type: string}}
        outputs: {idea: {type: string}}
        prompt:
          user: >-
            Lunch on {{ day }}? Usual: {{ user_preferences.lunch | default('none') }};
            {{ user_history | length }} past runs.
    """,
}

FLOWS = {
    "flows/remember.yaml": """
        flow: remember
        inputs: {user: {type: string}, restaurant: {type: string}, dish: {type: string, default: soup}}
        outputs: [lunch, restaurant, memories]
        memory: {scope: "users/{{ inputs.user }}"}
        steps:
          - {id: before, uses: read_lunch}
          - {id: save, uses: write_lunch}
          - {id: after, uses: read_lunch}
          - {id: parts, uses: read_parts, with: {name: lunch}}
          - {id: found, uses: query_memory, with: {memory_query: "the LUNCH order"}, goto: end}
    """,
    "flows/suggest_lunch.yaml": """
        flow: suggest_lunch
        inputs: {user: {type: string}, day: {type: string, default: Friday}}
        outputs: [idea]
        memory: {scope: "users/{{ inputs.user }}"}
        steps:
          - {id: think, uses: suggest}
    """,
    "flows/diary.yaml": """
        flow: diary
        inputs: {user: {type: string}, note: {type: string}}
        outputs: [runs]
        memory: {scope: "teams/{{ inputs.user }}"}
        steps:
          - {id: write, uses: note_history}
          - {id: read, uses: past, with: {query: ""}}
    """,
    "flows/builtins.yaml": """
        flow: builtins
        inputs: {user: {type: string}}
        outputs: [memories]
        memory: {scope: "users/{{ inputs.user }}"}
        steps:
          - {id: save, uses: save_to_memory, with: {memory_key: colour, memory_value: [teal, 3]}}
          - {id: look, uses: query_memory}
    """,
}


@pytest.fixture
def yard(make_yard: Callable[[dict[str, str]], Path]) -> Path:
    return make_yard({**BLOCKS, **FLOWS})


def stored(root: Path, scope: str, flow: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with open_store(locate(root / ".blockyard" / "state.db")) as store:
        return preferences(store, scope), history(store, scope, flow)


def test_memory_blocks_read_write_and_query(yard: Path) -> None:
    with Yard.load(yard) as api:
        result = api.run("remember", {"user": "ada", "restaurant": "Pho 1"})
    assert result.status == "finished", result.error
    assert result.outputs == {
        "lunch": {"restaurant": "Pho 1", "dish": "soup"},
        "restaurant": "Pho 1",
        "memories": {"lunch": {"restaurant": "Pho 1", "dish": "soup"}},
    }
    prefs, past = stored(yard, "users/ada", "remember")
    assert prefs == {"lunch": {"restaurant": "Pho 1", "dish": "soup"}}
    assert [(r["run_id"], r["status"], r["inputs"]["restaurant"]) for r in past] == [
        (result.run_id, "finished", "Pho 1")
    ]
    assert past[0]["outputs"] == result.outputs


def test_a_read_of_nothing_is_null_or_the_defaults(yard: Path) -> None:
    with Yard.load(yard) as api:
        events = list(
            api.events(api.run("remember", {"user": "bob", "restaurant": "Kebab"}).run_id)
        )
    before = next(e for e in events if e.type == "step_finished" and e.step == "before")
    assert before.data["outputs"] == {"lunch": None}


def _prompt(script: MockScript) -> str:
    """What the first model call of a run asked (a structured request: these flows have no agents)."""
    call = script.calls[0]
    assert isinstance(call, StructuredRequest)
    return call.user or ""


def test_memory_round_trip_across_two_runs_and_prompts_see_it(yard: Path) -> None:
    with Yard.load(yard) as api:
        with scripted("first") as script:
            api.run("suggest_lunch", {"user": "ada"}, run_id="first")
        assert "Usual: none; 0 past runs." in _prompt(script)
        api.run("remember", {"user": "ada", "restaurant": "Chipotle", "dish": "burrito"})
        with scripted("second") as script:
            api.run("suggest_lunch", {"user": "ada"}, run_id="second")
        # the preference written by another flow's run, and the first run of this flow
        assert "Usual: {'restaurant': 'Chipotle', 'dish': 'burrito'}; 1 past runs." in _prompt(
            script
        )
        with scripted("other") as script:
            # another scope sees nothing of ada's
            api.run("suggest_lunch", {"user": "zoe"}, run_id="other")
        assert "Usual: none; 0 past runs." in _prompt(script)


def test_history_writes_and_reads(yard: Path) -> None:
    with Yard.load(yard) as api:
        first = api.run("diary", {"user": "ops", "note": "deployed"})
        second = api.run("diary", {"user": "ops", "note": "rolled back"})
    assert first.outputs == {
        "runs": [{"note": "deployed"}]
    }  # its own note; the run's record comes at its end
    runs = second.outputs["runs"]  # type: ignore[index]
    notes = [r.get("note") for r in runs]
    assert notes.count("deployed") == 1 and notes.count("rolled back") == 1
    assert any(r.get("run_id") == first.run_id and r.get("status") == "finished" for r in runs)


def test_builtin_blocks_work_without_files_and_a_yard_file_overrides_them(
    yard: Path, make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    assert not (yard / "blocks" / "query_memory.yaml").exists()
    with Yard.load(yard) as api:
        result = api.run("builtins", {"user": "ada"})
    assert result.outputs == {"memories": {"colour": ["teal", 3]}}
    own = yard / "blocks" / "query_memory.yaml"
    own.write_text(
        "block: query_memory\nkind: memory_read\nmemory: {namespace: preferences, key: colour}\n"
        "inputs: {memory_query: {type: string, default: ''}}\noutputs: {memories: {type: any}}\n"
    )
    assert load_project(yard).block("query_memory").display == "blocks/query_memory.yaml"  # type: ignore[union-attr]
    with Yard.load(yard) as api:
        assert api.run("builtins", {"user": "ada"}).outputs == {"memories": ["teal", 3]}
    own.write_text("block: query_memory\nkind: [broken\n")
    found = cli(yard, "validate")
    # no silent fallback to the built-in
    assert found.code == 1 and "blocks/query_memory.yaml" in found.out


def test_a_scope_that_does_not_render_to_a_valid_scope_refuses_the_run(
    yard: Path, cli: Cli
) -> None:
    refused = cli(yard, "run", "remember", "--input", "user=../etc", "--input", "restaurant=x")
    assert refused.code == 2
    assert refused.err.strip() == (
        "error: flow 'remember': memory scope 'users/{{ inputs.user }}': invalid memory "
        "scope 'users/../etc': use segments of letters, digits and _.@:+- separated by "
        "'/', e.g. users/ada"
    )
    assert cli(yard, "runs").out == "no runs yet\n"


def test_a_failed_run_leaves_one_history_record_even_after_it_is_resumed(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = make_yard(
        {
            "blocks/flaky.yaml": "block: flaky\nkind: tool\ntool: flaky\ninputs: {x: {type: integer}}\n"
            "outputs: {y: {type: integer}}\n",
            "flows/try.yaml": "flow: try\ninputs: {x: {type: integer}}\noutputs: [y]\nmemory: {scope: jobs}\n"
            "steps:\n  - {id: go, uses: flaky}\n",
            "blockyard.yaml": 'tools:\n  flaky: {import: "yardtools:flaky"}\n',
            "yardtools.py": "from pathlib import Path\n\n\ndef flaky(x: int) -> int:\n"
            "    if not (Path(__file__).parent / 'ok').exists():\n        raise RuntimeError('not yet')\n"
            "    return x * 2\n",
        }
    )
    with Yard.load(root) as api:
        failed = api.run("try", {"x": 4})
        assert failed.status == "failed"
        assert [r["status"] for r in stored(root, "jobs", "try")[1]] == ["failed"]
        (root / "ok").write_text("")
        assert api.resume(failed.run_id).outputs == {"y": 8}
    (record,) = stored(root, "jobs", "try")[1]
    assert (record["run_id"], record["status"], record["outputs"], record["error"]) == (
        failed.run_id,
        "finished",
        {"y": 8},
        None,
    )


def test_the_lunch_example_from_a_fresh_copy(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "clone"
    for folder in ("flows", "blocks", "prompts"):
        shutil.copytree(REPO / folder, root / folder)
    # the example yard's model profiles
    shutil.copy(REPO / "blockyard.yaml", root / "blockyard.yaml")
    first = cli(root, "run", "order_lunch", "--input", "user_id=ada", "--json")
    assert first.code == 3, first.err
    events = first.events()
    run_id = events[0]["run_id"]
    check = next(e for e in events if e["type"] == "step_finished" and e["step"] == "check")
    assert check["data"]["outputs"]["preference"] == "no_preference"
    assert (
        events[-1]["step"] == "ask"
        and "No usual lunch saved for ada yet" in events[-1]["data"]["value"]["message"]
    )

    named = cli(
        root,
        "resume",
        run_id,
        "--approve",
        "--set",
        "restaurant=Chipotle",
        "--set",
        "dish=burrito",
        "--json",
    )
    assert named.code == 3 and named.events()[-1]["step"] == "remember", named.err
    saved = cli(root, "resume", run_id, "--approve", "--json")
    assert saved.code == 0, saved.err
    assert saved.events()[-1]["data"]["outputs"]["order_id"] == "LUNCH-TUE-chipotle-7"

    again = cli(root, "run", "order_lunch", "--input", "user_id=ada", "--json")
    assert again.code == 0, again.err
    steps = [e["step"] for e in again.events() if e["type"] == "step_started"]
    assert steps == ["recall", "check", "route", "order", "announce"]
    assert not [e for e in again.events() if e["type"] == "approval_required"]
    assert again.events()[-1]["data"]["outputs"]["order_id"] == "LUNCH-TUE-chipotle-7"

    remembered = cli(root, "memory", "get", "users/ada", "lunch", "--json")
    assert json.loads(remembered.out) == {"restaurant": "Chipotle", "dish": "burrito"}
    assert [r["status"] for r in stored(root, "users/ada", "order_lunch")[1]] == [
        "finished",
        "finished",
    ]
    other = cli(root, "run", "order_lunch", "--input", "user_id=bob", "--json")
    assert other.code == 3  # bob has no usual lunch yet


def test_values_and_history_records_keep_their_key_order_on_either_backend(yard: Path) -> None:
    # Postgres's store keeps JSONB, which sorts an object's keys: the value must come back as written
    with Yard.load(yard) as api:
        result = api.run("remember", {"user": "ada", "restaurant": "Pho 1"})
    assert result.status == "finished", result.error
    prefs, past = stored(yard, "users/ada", "remember")
    assert list(prefs["lunch"]) == ["restaurant", "dish"]
    assert list(past[0]) == [
        "run_id",
        "flow",
        "version",
        "status",
        "inputs",
        "outputs",
        "error",
        "started",
        "ended",
    ]
    assert list(past[0]["inputs"]) == ["user", "restaurant", "dish"]  # with its default


def test_items_stored_before_the_json_text_are_still_read(yard: Path) -> None:
    # a preference written as {"value": v} and a history record as itself, as earlier versions did
    with open_store(locate(yard / ".blockyard" / "state.db")) as store:
        store.put(
            ("users", "ada", "preferences"),
            "lunch",
            {"value": {"restaurant": "Old", "dish": "stew"}},
        )
        store.put(
            ("users", "ada", "flows", "remember", "history"),
            "r-old",
            {"run_id": "r-old", "status": "finished"},
        )
    prefs, past = stored(yard, "users/ada", "remember")
    assert prefs == {"lunch": {"restaurant": "Old", "dish": "stew"}}
    assert past == [{"run_id": "r-old", "status": "finished"}]
