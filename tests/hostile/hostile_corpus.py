"""Generated hostile input: mutated copies of the example yard's files, and hostile CLI arguments.

Deterministic (a seeded Random) so that a finding is reproducible: the case's label names the
file, the mutation and the seed. Values are what an attacker or a careless user writes: integers
past 64 bits and past Python's digit limit, lone surrogates, template and expression bombs,
includes, absurd durations, never-firing cron, deep nesting, wrong types, broken YAML bytes.
"""

from __future__ import annotations

import copy
import functools
import os
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.support.example import copy_example_yard

REPO = Path(__file__).resolve().parents[2]

HOSTILE_SCALARS: list[Any] = [
    10**30,
    -(10**30),
    2**63,
    -(2**63) - 1,
    0,
    -1,
    1.5e308,
    float("inf"),
    float("nan"),
    "",
    " ",
    "x" * 5000,
    "\u202e\u0000",
    "é" * 100,
    True,
    None,
    [],
    {},
    [[[[[]]]]],
    "{{ 'a' * 10**8 }}",
    "{{ 10 ** (10 ** 9) }}",
    "{{ 10 ** 30 }}",
    "{{ 'x'|center(10**9) }}",
    "{{ range(10**9)|list }}",
    "{% include 'secret.txt' %}",
    "{% extends 'base' %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{{ '%*d' % (10**9, 1) }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ context }}",
    "{{ inputs.nope.deeper }}",
    "{{ unclosed",
    "10 ** (10 ** 9) > 5",
    "@daily",
    "0 0 30 2 *",
    "0 9 * * 5L",
    "* * * * * * * *",
    "3000000d",
    "0s",
    "-5s",
    "99999999999999999999s",
    "1e400s",
    "../../etc/passwd",
    "/etc/passwd",
    "end",
    "nope_step",
    "default",
    "mock",
    "openai",
]
# Templates and expressions that parse and name nothing unknown, so that they reach a run.
BOMBS = [
    "{{ 'a' * 10**8 }}",
    "{{ 10 ** (10 ** 7) }}",
    "{{ 10 ** 30 }}",
    "{{ 'x'|center(10**9) }}",
    "{{ range(10**9)|list|length }}",
    "{{ '%*d' % (10**9, 1) }}",
    "{{ 2 ** 64 }}",
    "{{ -(2 ** 63) - 1 }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{{ 'ab' * 600000 }}",
    "{{ ('x' * 1000).replace('x', 'y' * 1000) }}",
    "{{ [1] * 10**8 }}",
    "{{ 'x'.ljust(10**9) }}",
    "{{ '{:>1000000000}'.format('x') }}",
    "{{ 'x' ~ 'y' * 10**7 }}",
    "{{ 1 << 100000 }}",
    "{{ 9999999999999999999 }}",
    "{{ '\ud800' }}",
    "10 ** (10 ** 9) > 5",
    "range(10**8)|list",
    "{% include 'flows/hello.yaml' %}",
    "{% import 'x' as y %}{{ 1 }}",
]
HOSTILE_KEYS = ["__proto__", "$ref", "steps", "id", "uses", "goto", "x" * 300, "0", "é"]

RAW_SNIPPETS = [
    "!!python/object/apply:os.system ['echo pwned']",
    "a: &a [*a, *a]",
    "x: " + "[" * 200 + "]" * 200,
    "key: value\nkey: again",
    "\t tab: indent",
    "%YAML 1.1\n---\nx: yes",
    "--- a\n--- b",
    "k: !!binary aGVsbG8=",
    "lol: &a ['lol','lol']\nl2: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nl3: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "l4: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\nl5: [*d,*d,*d,*d,*d,*d,*d,*d,*d]",
]

RUN_INPUTS = {
    "hello": ["--input", "name=Ada"],
    "triage_ticket": ["--input", "ticket=My invoice is wrong"],
    "write_article": ["--input", "topic=bees"],
    "summarize_batch": ["--input", "documents=[one, two]"],
    "tldr": ["--input", "text=Some text to shorten."],
    "order_lunch": ["--input", "user_id=ada"],
    "research": ["--input", "question=Why is the sky blue?"],
    "team_report": [],
    "swe_team": ["--input", "prompt=Build an MVP for a todo-list app"],
}


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, (*prefix, index))


def _evaluated(path: tuple[Any, ...]) -> str | None:
    """How the engine reads the string at `path`: as a template, a bare expression, or not at all."""
    keys = [part for part in path if isinstance(part, str)]
    if "compute" in keys or keys[-1:] in (["expr"], ["until"], ["items"]):
        return "expression"
    if "with" in keys or "prompt" in keys or keys[-1:] == ["value"] or keys[-1:] == ["message"]:
        return "template"
    return None


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return data


def _delete(data: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return None
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return data


@functools.cache
def _parsed(text: str) -> Any:
    return yaml.safe_load(text)


def mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """One mutation of a YAML file's text; returns (new text, what was done)."""
    # the corpus mutates the ~50 files of the example 160 times: each is parsed once, and each mutation
    # changes a deep copy of that (the same data as parsing it again, without PyYAML's cost)
    data = copy.deepcopy(_parsed(text))
    choice = rng.random()
    if choice < 0.08:
        cut = rng.randrange(len(text))
        return text[:cut], f"truncated at {cut}"
    if choice < 0.16:
        snippet = rng.choice(RAW_SNIPPETS)
        lines = text.splitlines()
        at = rng.randrange(len(lines) + 1)
        return "\n".join(
            [*lines[:at], snippet, *lines[at:]]
        ) + "\n", f"raw snippet at line {at + 1}"
    if not isinstance(data, dict):
        return text + "\n" + rng.choice(RAW_SNIPPETS), "raw snippet appended"
    paths = [p for p in _paths(data) if p]
    path = rng.choice(paths)
    evaluated = [p for p in paths if isinstance(_get(data, p), str) and _evaluated(p)]
    if choice < 0.45 and evaluated:
        # keep the file valid: a template or an expression the engine evaluates becomes a bomb
        path = rng.choice(evaluated)
        bomb = rng.choice(BOMBS)
        if _evaluated(path) == "expression":
            bomb = (
                bomb.removeprefix("{{ ").removesuffix(" }}")
                if bomb.startswith("{{ ")
                else "1 + " + str(10**30)
            )
        _set(data, path, bomb)
        what = f"set {path} to {bomb!r:.60}"
    elif choice < 0.55:
        _delete(data, path)
        what = f"deleted {path}"
    elif choice < 0.62:
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict):
            parent[rng.choice(HOSTILE_KEYS)] = rng.choice(HOSTILE_SCALARS)
            what = f"added a key under {path[:-1]}"
        else:
            parent.append(rng.choice(HOSTILE_SCALARS))
            what = f"appended to {path[:-1]}"
    else:
        value = rng.choice(HOSTILE_SCALARS)
        _set(data, path, value)
        what = f"set {path} to {value!r:.60}"
    try:
        dumped = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=1000)
    except (yaml.YAMLError, ValueError):
        return text + "\nextra: [", "unrepresentable value; broke the text instead"
    if "10 ** (10 ** 9)" not in what and rng.random() < 0.1:
        dumped = dumped.replace("1000000000000000000000000000000", "1" + "0" * 5000)
    return dumped, what


@functools.cache
def _flow_names() -> list[str]:
    return sorted(
        p.stem for p in (REPO / "flows").glob("*.yaml") if not p.name.endswith(".test.yaml")
    )


@functools.cache
def _users(block: str) -> list[str]:
    """The example flows that use `block`, so that a mutated block is also run."""
    pattern = re.compile(rf"\b(uses|delegates):.*\b{re.escape(block)}\b")
    return [
        name
        for name in _flow_names()
        if pattern.search((REPO / "flows" / f"{name}.yaml").read_text())
    ]


def file_cases(
    workdir: Path, count: int, seed: int, part: range | None = None
) -> list[dict[str, Any]]:
    """`count` yards, each the example yard with one file mutated; per yard: validate, then run a flow.

    `part` (default: all) selects the yards to write and run by number: the corpus is generated whole
    either way (one seeded sequence), so yard #n is the same mutation whichever part runs it, and the
    parts together are the whole corpus (the test files split it so xdist spreads it over workers)."""
    rng = random.Random(seed)
    chosen = range(count) if part is None else part
    targets = sorted(
        [
            *(REPO / "flows").glob("*.yaml"),
            *(REPO / "blocks").glob("*.yaml"),
            REPO / "blockyard.yaml",
        ]
    )
    flows = _flow_names()
    texts = {target: target.read_text(encoding="utf-8") for target in targets}
    # each yard is this copy of the example, its files hard links to it, but for the mutated file (a new one)
    pristine = copy_example_yard(workdir / "example") if chosen else workdir / "example"
    cases: list[dict[str, Any]] = []
    for number in range(count):
        target = rng.choice(targets)
        relative = target.relative_to(REPO)
        yard = workdir / f"yard{number}"
        text, what = mutate_text(texts[target], rng)
        broken = rng.random() < 0.05
        if number in chosen:
            shutil.copytree(pristine, yard, copy_function=os.link)
            (yard / relative).unlink()  # a new file, not a write through the link into every yard
            if broken:
                (yard / relative).write_bytes(
                    text.encode("utf-8")[:200] + b"\xff\xfe\x00 bad bytes"
                )
            else:
                (yard / relative).write_text(text, encoding="utf-8")
        if broken:
            what += "; then broke the encoding"
        flow = (
            relative.stem.removesuffix(".test")
            if relative.parts[0] == "flows"
            else rng.choice(_users(relative.stem) or flows)
        )
        label = f"seed {seed} #{number}: {relative}: {what}"
        mine = [
            {
                "argv": ["validate", "--format", rng.choice(["text", "json", "github", "sarif"])],
                "cwd": str(yard),
                "label": label,
            },
            {
                "argv": ["run", flow, *RUN_INPUTS.get(flow, []), "--json"],
                "cwd": str(yard),
                "label": label,
            },
        ]
        if rng.random() < 0.3:
            extra = rng.choice(
                [["graph", flow], ["flows"], ["blocks"], ["schedules"], ["runs"], ["test"]]
            )
            mine.append({"argv": extra, "cwd": str(yard), "label": label})
        if number in chosen:
            cases += mine
    return cases


SURROGATE = "\udcff"  # what Python makes of an undecodable byte in argv (surrogateescape)


def cli_cases(yard: Path, outside: Path) -> list[dict[str, Any]]:
    """Hostile arguments for every command, run in a healthy copy of the example yard."""
    huge = "1" + "0" * 5000
    argvs: list[list[str]] = [
        ["run", "hello", "--input", f"name={SURROGATE}"],
        ["run", "hello", "--input", f"{SURROGATE}=x"],
        ["run", "hello", "--input", "name=" + "x" * 200_000],
        ["run", "hello", "--input", f"name={huge}"],
        ["run", "hello", "--input", "name=100000000000000000000000"],
        ["run", "summarize_batch", "--input", "documents=[1e400, 100000000000000000000000]"],
        [
            "run",
            "summarize_batch",
            "--input",
            "max_sentences=100000000000000000000000",
            "--input",
            "documents=[a]",
        ],
        ["run", "summarize_batch", "--input", f"max_sentences={huge}", "--input", "documents=[a]"],
        ["run", "hello", "--input", "name"],
        ["run", "hello", "--input", "=x"],
        ["run", "hello", "--input", "name=[unclosed"],
        ["run", "hello", "--input", "name=!!python/object/apply:os.system [id]"],
        ["run", "hello", "--inputs-file", "/dev/zero"],
        ["run", "hello", "--inputs-file", "/proc/self/environ"],
        ["run", "hello", "--inputs-file", str(outside)],
        ["run", "hello", "--inputs-file", "/nonexistent/file.yaml"],
        ["run", "hello", "--inputs-file", "flows"],
        ["run", "hello", "--run-id", "../../escape"],
        ["run", "hello", "--run-id", "x" * 10_000],
        ["run", "hello", "--run-id", SURROGATE],
        ["run", "hello", "--run-id", ""],
        ["run", "hello", "--thread", SURROGATE],
        ["run", "hello", "--thread", "t" * 10_000],
        ["run", SURROGATE],
        ["run", "../flows/hello"],
        ["run", "x" * 10_000],
        ["run", "hello", "--root", "/nonexistent"],
        ["run", "hello", "--root", "/etc"],
        ["run", "hello", "--root", "/proc"],
        ["run", "hello", "--bogus"],
        ["resume", "nope"],
        ["resume", SURROGATE, "--approve"],
        ["resume", "nope", "--approve", "--reason", SURROGATE],
        ["resume", "nope", "--approve", "--set", f"x={huge}"],
        ["resume", "nope", "--approve", "--reject"],
        ["runs", "--limit", "-1"],
        ["runs", "--limit", huge],
        ["runs", "--limit", "99999999999999999999"],
        ["runs", "--status", SURROGATE],
        ["runs", "--flow", "x" * 10_000],
        ["runs", "show", "nope"],
        ["runs", "show", SURROGATE],
        ["runs", "show", "%"],
        ["graph", "nope"],
        ["graph", "hello", "--format", "svg"],
        ["graph", SURROGATE],
        ["gates", "--flow", SURROGATE],
        ["gates", "--expire"],
        ["threads", "--limit", "-5"],
        ["threads", "show", SURROGATE],
        ["threads", "show", "nope"],
        ["memory", "get", SURROGATE, "k"],
        ["memory", "get", "users/ada", SURROGATE],
        ["memory", "set", "users/ada", "k", f"{huge}"],
        ["memory", "set", "users/ada", "k", "100000000000000000000000"],
        ["memory", "set", "users/ada", "k", SURROGATE],
        ["memory", "set", "../../..", "k", "v"],
        ["memory", "set", "", "k", "v"],
        ["memory", "list", "/" * 500],
        ["memory", "delete", "users/ada"],
        ["memory", "frobnicate", "x"],
        ["validate", "/etc/passwd"],
        ["validate", "/proc/self/environ"],
        ["validate", "/dev/zero"],
        ["validate", str(outside)],
        ["validate", "--format", "html"],
        ["validate", SURROGATE],
        ["test", "/etc/passwd"],
        ["test", "nope.test.yaml"],
        ["test", SURROGATE],
        ["blocks", "--tag", SURROGATE],
        ["blocks", "--category", "x" * 10_000],
        ["flows", "--root", SURROGATE],
        ["schedules", "--json"],
        ["optimize", "summarize", "--examples", "/dev/zero"],
        ["optimize", "nope", "--examples", str(outside)],
        ["serve", "--port", "0"],
        ["serve", "--port", "99999"],
        ["serve", "--port", huge],
        ["serve", "--grace", "-1"],
        ["serve", "--grace", "nan"],
        ["serve", "--host", "0.0.0.0"],
        ["init", str(outside)],
        ["--bogus"],
        [],
        [SURROGATE],
    ]
    return [{"argv": argv, "cwd": str(yard), "label": f"cli #{n}"} for n, argv in enumerate(argvs)]
