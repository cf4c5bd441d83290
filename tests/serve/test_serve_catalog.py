"""Which flow versions a reload serves: new good ones swap in, broken ones keep their last good version."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.serve.catalog import Catalog, load_catalog
from engine.validate.command import validate
from tests.serve.serve_helpers import ADD_FLOW, YARD


def write(root: Path, name: str, text: str) -> None:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text.lstrip("\n"), encoding="utf-8")


def test_a_clean_yard_serves_every_flow(yard: Path) -> None:
    catalog = load_catalog(yard)
    assert sorted(catalog.flows) == ["add", "slow"]
    assert catalog.ok and not catalog.stale
    assert catalog.flows["add"].version == 1
    assert catalog.flows["add"].file == "flows/add.yaml"
    assert catalog.generation == 1


def test_a_valid_edit_swaps_in_and_untouched_flows_keep_their_entry(yard: Path) -> None:
    first = load_catalog(yard)
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 2"))
    second = load_catalog(yard, first)
    assert second.flows["add"].version == 2
    assert second.flows["add"].digest != first.flows["add"].digest
    assert second.flows["slow"] is first.flows["slow"]
    assert second.generation == 2


def test_a_broken_flow_keeps_serving_its_last_good_version(yard: Path) -> None:
    first = load_catalog(yard)
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 2") + "  - id: [oops\n")
    second = load_catalog(yard, first)
    assert second.flows["add"] is first.flows["add"]
    assert [d.file for d in second.stale["add"]] == ["flows/add.yaml"]
    assert any(d.file == "flows/add.yaml" and d.severity == "error" for d in second.diagnostics)
    assert not second.ok
    assert "slow" not in second.stale
    # fixed again: the new version swaps in and the problem is gone
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 3"))
    third = load_catalog(yard, second)
    assert third.flows["add"].version == 3 and third.ok and not third.stale


def test_a_schema_error_in_a_flow_keeps_the_last_good_version(yard: Path) -> None:
    first = load_catalog(yard)
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 2\nbogus_key: 1"))
    second = load_catalog(yard, first)
    assert second.flows["add"].version == 1
    assert second.stale["add"][0].code.startswith("BY1")


def test_a_new_flow_that_is_broken_is_not_served(yard: Path) -> None:
    first = load_catalog(yard)
    write(yard, "flows/new.yaml", "flow: new\nsteps: []\n")
    second = load_catalog(yard, first)
    assert "new" not in second.flows
    assert any(d.file == "flows/new.yaml" for d in second.diagnostics)


def test_a_broken_block_holds_back_every_flow_that_uses_it(yard: Path) -> None:
    first = load_catalog(yard)
    write(
        yard,
        "blocks/adder.yaml",
        YARD["blocks/adder.yaml"].replace("kind: transform", "kind: nonsense"),
    )
    write(yard, "flows/slow.yaml", YARD["flows/slow.yaml"].replace("version: 1", "version: 2"))
    second = load_catalog(yard, first)
    assert second.flows["add"] is first.flows["add"]
    assert second.flows["slow"] is first.flows["slow"]  # its new version needs the broken block
    assert "blocks/adder.yaml" in {d.file for d in second.stale["slow"]}


def test_a_broken_new_version_of_a_block_does_not_fall_back_to_the_old_one(yard: Path) -> None:
    first = load_catalog(yard)
    write(
        yard,
        "blocks/adder_v2.yaml",
        YARD["blocks/adder.yaml"]
        .replace("version: 1", "version: 2")
        .replace('total: "x + y"', 'total: "x + y"\n  extra: "1"\n  bad: [unclosed'),
    )
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 2"))
    second = load_catalog(yard, first)
    assert second.flows["add"].version == 1
    assert {d.file for d in second.stale["add"]} == {"blocks/adder_v2.yaml"}


def test_a_broken_config_holds_back_every_flow(yard: Path) -> None:
    first = load_catalog(yard)
    write(yard, "blockyard.yaml", "server: {max_concurrent_runs: zero}\n")
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 2"))
    second = load_catalog(yard, first)
    assert second.flows["add"].version == 1
    assert set(second.stale) == {"add", "slow"}


def test_a_deleted_flow_is_no_longer_served(yard: Path) -> None:
    first = load_catalog(yard)
    (yard / "flows/slow.yaml").unlink()
    second = load_catalog(yard, first)
    assert sorted(second.flows) == ["add"]


def test_an_unusable_schedule_is_reported_as_validate_reports_it_and_holds_the_flow_back(
    yard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(yard)  # validate shows paths relative to the current directory
    first = load_catalog(yard)
    for schedule, code, message in [
        (
            "cron: '0 25 * * *'",
            "BY507",
            "schedule: cron '0 25 * * *': hour '25' is not valid: out of range",
        ),
        ("cron: '0 0 30 2 *'", "BY510", "schedule: cron '0 0 30 2 *' never fires"),
        (
            "cron: '0 9 * * *', timezone: Mars/Olympus",
            "BY508",
            "schedule: unknown time zone 'Mars/Olympus'",
        ),
    ]:
        text = ADD_FLOW.replace(
            "version: 1", f"version: 2\nschedule: {{{schedule}, inputs: {{a: 1}}}}"
        )
        write(yard, "flows/add.yaml", text)
        second = load_catalog(yard, first)
        problems = [d for d in second.diagnostics if d.file == "flows/add.yaml"]
        assert [(d.code, d.line) for d in problems] == [(code, 3)], schedule
        assert problems[0].message.startswith(message)
        # /diagnostics agrees with validate
        assert list(second.diagnostics) == validate([], yard).diagnostics
        assert second.flows["add"].version == 1


def test_the_concurrency_limit_comes_from_the_config(
    make_yard: Callable[[dict[str, str]], Path],
) -> None:
    root = make_yard({**YARD, "blockyard.yaml": "server: {max_concurrent_runs: 3}\n"})
    assert load_catalog(root).max_concurrent_runs == 3
    assert Catalog().max_concurrent_runs == 32


def test_a_flow_that_does_not_compile_is_held_back(yard: Path) -> None:
    from engine.core.errors import BlockyardError
    from engine.definitions.pinned import Bundle
    from engine.serve.catalog import COMPILE_ERROR

    def compiler(bundle: Bundle) -> None:
        if bundle.version == 2:
            raise BlockyardError("approval gates are not supported yet")

    first = load_catalog(yard, compiler=compiler)
    write(yard, "flows/add.yaml", ADD_FLOW.replace("version: 1", "version: 2"))
    second = load_catalog(yard, first, compiler=compiler)
    assert second.flows["add"].version == 1
    [problem] = second.stale["add"]
    assert (problem.code, problem.file, problem.line) == (COMPILE_ERROR, "flows/add.yaml", 1)
    assert problem.message == "flow 'add' does not compile: approval gates are not supported yet"
    assert problem in second.diagnostics


def test_a_compiler_crash_holds_back_only_that_flow(yard: Path) -> None:
    from engine.definitions.pinned import Bundle

    def compiler(bundle: Bundle) -> None:
        if bundle.name == "slow":
            raise ImportError("cannot import name 'x'")

    catalog = load_catalog(yard, compiler=compiler)
    assert sorted(catalog.flows) == ["add"]
    [problem] = catalog.stale["slow"]
    assert (
        problem.message
        == "flow 'slow' does not compile (internal error): ImportError: cannot import name 'x'"
    )


def test_a_broken_delegated_flow_holds_back_the_flow_whose_agent_delegates_to_it(
    yard: Path,
) -> None:
    write(
        yard,
        "blocks/boss.yaml",
        """
block: boss
kind: agent
inputs: {a: {type: integer}}
outputs: {answer: {type: string}}
prompt: {user: "{{ a }}"}
""",
    )
    write(
        yard,
        "flows/team.yaml",
        """
flow: team
inputs: {a: {type: integer}}
outputs: [answer]
steps:
  - {id: lead, uses: boss, delegates: [add]}
""",
    )
    first = load_catalog(yard, compiler=None)
    assert "team" in first.flows and not first.stale
    write(yard, "flows/add.yaml", ADD_FLOW.replace("outputs: [total]", "outputs: [total, nowhere]"))
    second = load_catalog(yard, first, compiler=None)
    assert {d.file for d in second.stale["team"]} == {
        "flows/add.yaml"
    }  # the delegated flow is part of it
    assert second.flows["team"] is first.flows["team"]
