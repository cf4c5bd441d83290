"""The mutation testing of the guarantees (`bash .ci/mutation`, .ci/mutation.py, docs/testing.md) stays
pointed at them: every group names modules and tests that exist, the modules that carry the guarantees
are all in some group (a new semantic check too), the list of equivalent mutants gives a reason for each,
the rule that calls a mutant equivalent takes only what it says, and the weekly workflow sets the checkout
up, runs it and keeps the report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

REPO = Path(__file__).resolve().parents[1]

# the modules issue 36 names: what the product promises rests on them
GUARANTEES = (
    "engine/state/messages.py",
    "engine/state/gates.py",
    "engine/state/journal.py",
    "engine/state/liveness.py",
    "engine/state/fencing.py",
    "engine/templates/limits.py",
    "engine/templates/sandbox.py",
    "engine/templates/checks.py",
    "engine/serve/hosts.py",
    "engine/serve/auth.py",
    "engine/serve/bodies.py",
    "engine/serve/middleware.py",
)


def runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "blockyard_mutation_runner", REPO / ".ci" / "mutation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_every_group_names_files_that_exist() -> None:
    groups = runner().GROUPS
    assert len(groups) >= 8
    assert len({group.name for group in groups}) == len(groups)
    for group in groups:
        assert group.modules and group.tests, group.name
        missing = [path for path in (*group.modules, *group.tests) if not (REPO / path).exists()]
        assert missing == [], f"{group.name}: {missing}"


def test_the_modules_that_carry_the_guarantees_are_all_mutated() -> None:
    mutated = {module for group in runner().GROUPS for module in group.modules}
    semantic = {
        str(path.relative_to(REPO))
        for path in (REPO / "engine" / "validate" / "semantic").glob("*.py")
    }
    assert len(semantic) > 20
    assert sorted({*GUARANTEES, *semantic} - mutated) == []


def test_each_equivalent_mutant_is_named_with_its_reason() -> None:
    module = runner()
    listed = module.read_equivalent(REPO / ".ci" / "mutation-equivalent.txt")
    assert listed, "the list of equivalent mutants is empty"
    for name, why in listed.items():
        assert name.startswith("engine.") and "__mutmut_" in name, name
        assert len(why) > 20, f"{name}: say why no test can tell it from the code"
        assert (REPO / module.module_of(name)).is_file(), name


def test_mutant_names_lead_to_their_modules() -> None:
    module_of = runner().module_of
    assert module_of("engine.state.gates.x_claim__mutmut_3") == "engine/state/gates.py"
    assert module_of("engine.state.fencing.xǁFenceǁwrite__mutmut_16") == "engine/state/fencing.py"
    assert (
        module_of("engine.validate.semantic.x_check_project__mutmut_1")
        == "engine/validate/semantic/__init__.py"
    )


def test_only_a_change_of_case_in_sql_is_equivalent_by_rule() -> None:
    rule = runner().equivalent_by_rule

    def diff(before: str, after: str) -> str:
        return f"--- engine/state/x.py\n+++ engine/state/x.py\n@@ -1,1 +1,1 @@\n-{before}\n+{after}"

    select = '    rows = conn.execute("SELECT id FROM runs WHERE status = ?", (status,))'
    assert (
        rule(diff(select, select.replace("SELECT id FROM runs WHERE", "select id from runs where")))
        is not None
    )
    assert (
        rule(diff(select, select.replace("SELECT id FROM runs", "SELECT ID FROM RUNS"))) is not None
    )
    assert rule(diff(select, select.upper())) is None  # the code around the text changed too
    # not SQL's case: a message, a value the statement compares with, a word Postgres's rewrite needs
    message = '    raise ValueError("the run is not waiting")'
    assert rule(diff(message, message.upper())) is None
    assert rule(diff(select, select.replace("status = ?", "status = 'RUNNING'"))) is None
    is_null = '    conn.execute("UPDATE runs SET owner = ? WHERE owner IS ?", (a, b))'
    assert rule(diff(is_null, is_null.lower())) is None
    assert rule(diff(select, select.replace("SELECT id", "XXSELECT id"))) is None
    assert rule(diff(select, select)) is None
    tail = '               + (" AND idx < ?" if after is not None else "") + " ORDER BY idx DESC LIMIT ?")'
    assert rule(diff(tail, tail.replace(" AND idx < ?", " and IDX < ?"))) is not None
    assert (
        rule(diff(tail, tail.replace("ORDER BY idx DESC LIMIT", "order by idx desc limit")))
        is not None
    )
    english = '    _refuse(path, "the number is not finite (NaN, Infinity and numbers are not JSON values)")'
    assert rule(diff(english, english.upper())) is None


def test_the_weekly_workflow_runs_every_group_from_a_fresh_setup_and_keeps_each_report() -> None:
    workflow = yaml.safe_load(
        (REPO / ".github" / "workflows" / "mutation.yml").read_text(encoding="utf-8")
    )
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"schedule", "workflow_dispatch"} and len(triggers["schedule"]) == 1
    (job,) = workflow["jobs"].values()
    assert job["strategy"]["matrix"]["group"] == [group.name for group in runner().GROUPS]
    assert job["strategy"]["fail-fast"] is False and job["timeout-minutes"] <= 360
    steps = job["steps"]
    assert [step["uses"].split("@")[0] for step in steps if "uses" in step] == [
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
    ]
    runs = [step for step in steps if "run" in step]
    assert runs[0]["run"] == "bash .ci/setup --system"
    assert 'bash .ci/mutation --fail-under 85 "$GROUP" 2>&1 | tee mutation.log' in runs[1]["run"]
    assert 'BLOCKYARD_MUTATION_JOBS="$(nproc)"' in runs[1]["run"]
    assert runs[1]["shell"] == "bash", (
        "GitHub adds -o pipefail only for an explicit shell: tee would hide a failure"
    )
    assert runs[1]["env"] == {
        "CI": "true",
        "GROUP": "${{ matrix.group }}",
        "GROUPS": "${{ github.event.inputs.groups }}",
    }
    kept = next(step for step in steps if "upload-artifact" in step.get("uses", ""))
    assert kept["if"] == "always()" and "build/mutation/report/" in kept["with"]["path"]
    assert (REPO / ".ci" / "mutation").read_text(encoding="utf-8").startswith("#!/usr/bin/env bash")
