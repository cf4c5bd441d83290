"""The lists in the docs that name the engine's vocabulary — event types, the names a custom event may not
take, validation codes, HTTP routes, the import layers — agree with the code they describe, so that a list
edited in one place only fails here (issue 32). Where a page need not repeat a list it links to the generated
reference instead (docs/reference/, `python -m engine.reference`, checked by tests/test_reference.py); the
lists that stay are compared with their one declaration:

- event types (runtime.md's trace, compiler.md's step events, every end of an execution): `EventType` and its
  sets, engine/core/events.py;
- the names BY425 refuses: `RESERVED_EVENT_NAMES`, engine/core/events.py;
- the code tables (flows.md, review.md, serve.md) and every `BYnnn` a page names: engine/validate/codes.py;
- serve.md's route table, langgraph-api.md's endpoint table, every `METHOD /path` a page names: the apps'
  routes (engine/serve/app.py, engine/serve/langgraph_api/app.py);
- architecture.md's layers and package map: the layers contract of pyproject.toml (import-linter).

Reads files and builds the apps' route tables; opens no state database."""

from __future__ import annotations

import re
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.openapi.utils import get_openapi

from engine.core.events import EVENT_TYPES, RESERVED_EVENT_NAMES, STEP_EVENT_TYPES, TERMINAL_TYPES
from engine.reference import routes
from engine.serve.langgraph_api.app import create_langgraph_app
from engine.serve.server import Server, Settings
from engine.spec.config import ModelPolicy, PolicySpec
from engine.validate.codes import PROJECT, SERVE, VERSIONS, WARNINGS, all_codes, stage

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
TYPES = frozenset(str(kind) for kind in EVENT_TYPES)
STEP_TYPES = frozenset(str(kind) for kind in STEP_EVENT_TYPES)
TERMINAL = frozenset(str(kind) for kind in TERMINAL_TYPES)
# what BY425 refuses besides the event types: the other names a client sees on the server's streams
STREAM_NAMES = frozenset(str(name) for name in RESERVED_EVENT_NAMES) - TYPES
PLACEHOLDER_CODE = "BY123"  # the form of a code (`BY123`), not a code
METHODS = "GET|POST|PUT|PATCH|DELETE"


def pages() -> list[Path]:
    """README.md and the pages of docs/ people write (docs/reference/ is generated from the code)."""
    return [
        REPO / "README.md",
        *sorted(path for path in DOCS.rglob("*.md") if "reference" not in path.parts),
    ]


def text(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


def blocks(path: Path) -> Iterator[str]:
    """The page's paragraphs, list items and table rows outside fenced code: the units a list lives in."""
    inside = False
    current: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            inside = not inside
            line = ""
        if inside:
            continue
        starts = line.startswith("|") or re.match(r"^\s*(?:[-*]|\d+\.)\s", line) is not None
        if not line.strip() or starts:
            if current:
                yield "\n".join(current)
            current = [line] if line.strip() else []
            if line.startswith("|"):  # a table row is a unit of its own
                yield "\n".join(current)
                current = []
        else:
            current.append(line)
    if current:
        yield "\n".join(current)


def named(block: str, names: frozenset[str]) -> set[str]:
    """The names of `names` the block writes as code spans."""
    return set(re.findall(r"`([a-z_]+)`", block)) & names


def table(page: str, head: str) -> list[list[str]]:
    """The rows (as cells) of the table of `page` whose header row is `head`."""
    lines = text(page).splitlines()
    assert lines.count(head) == 1, f"{page}: expected one table headed {head!r}; was it reworded?"
    start = lines.index(head) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


# ---- event types ----------------------------------------------------------------------------------------


def test_the_runtime_page_walks_through_every_event_type() -> None:
    """docs/runtime.md, "Events": the order of a run's trace names every type once."""
    found = re.search(
        r"A run's trace\s+reads like this:(.*?)at the end\.", text("runtime.md"), re.S
    )
    assert found, "runtime.md: the walk through a run's trace was reworded; keep this test's anchor"
    assert named(found.group(1), TYPES) == TYPES, sorted(TYPES ^ named(found.group(1), TYPES))


@pytest.mark.parametrize("page", ["runtime.md", "serve.md", "flows.md", "glossary.md"])
def test_the_pages_about_events_link_to_the_generated_reference(page: str) -> None:
    """What each type carries is said once, in docs/reference/events.md (made from EVENT_DOCS)."""
    assert "](reference/events.md" in text(page)


def test_the_compiler_page_lists_exactly_the_step_events() -> None:
    """docs/compiler.md, "Events": what nodes write to LangGraph's custom stream is STEP_EVENT_TYPES."""
    rows = table("compiler.md", "| type | when | data |")
    listed = [re.sub(r"`", "", row[0]) for row in rows]
    assert sorted(listed) == sorted(STEP_TYPES), sorted(STEP_TYPES ^ set(listed))


def test_a_block_naming_most_event_types_names_them_all() -> None:
    """A paragraph or table that names half of the event types or more is a list of them (every new one of
    those lists is held to the registry here, without being registered in this test). The compiler page's
    table lists the step events, checked above."""
    wrong = []
    for path in pages():
        for block in blocks(path):
            found = named(block, TYPES)
            step_table = path.name == "compiler.md" and found == STEP_TYPES
            if len(found) * 2 >= len(TYPES) and not step_table and found != TYPES:
                wrong.append(
                    f"{path.relative_to(REPO)}: lacks {sorted(TYPES - found)}: {block[:80]!r}"
                )
    assert wrong == [], (
        "link to docs/reference/events.md instead of listing the event types, or list them all"
    )


def test_every_end_of_an_execution_names_the_terminal_types() -> None:
    """ "... ends with `run_finished`, `run_failed` or `approval_required`": a paragraph that says how an
    execution (or its stream, or `--json`) ends, naming two of TERMINAL_TYPES or more, names all of them."""
    seen = 0
    for path in pages():
        for block in blocks(path):
            found = named(block, TERMINAL)
            if len(found) >= 2 and re.search(r"\b(?:ends?|ending|last)\b", block):
                seen += 1
                assert found == TERMINAL, (
                    f"{path.relative_to(REPO)} lacks {sorted(TERMINAL - found)}: {block}"
                )
    # cli.md, glossary.md, runtime.md (3), serve.md: the rule still finds what it guards
    assert seen >= 5


def test_a_list_of_the_names_by425_refuses_is_whole_or_says_it_is_not() -> None:
    """Where BY425 is explained, the names it refuses are the reference's list (a link), all of them, or
    examples that say so (`...`)."""
    for path in pages():
        for block in blocks(path):
            found = named(block, STREAM_NAMES)
            if "BY425" in block and found:
                assert found == STREAM_NAMES or "..." in block, f"{path.relative_to(REPO)}: {block}"
    assert "(reference/events.md#custom-events)" in text("flows.md")


# ---- validation codes -----------------------------------------------------------------------------------


def test_every_code_a_page_names_exists() -> None:
    known = set(all_codes())
    unknown: dict[str, list[str]] = {}
    for path in [*pages(), REPO / "CHANGELOG.md"]:
        for code in (
            set(re.findall(r"\bBY\d{3}\b", path.read_text(encoding="utf-8")))
            - known
            - {PLACEHOLDER_CODE}
        ):
            unknown.setdefault(code, []).append(str(path.relative_to(REPO)))
    assert unknown == {}, "no such code (engine/validate/codes.py)"


def test_the_semantic_code_table_has_every_semantic_code_in_order() -> None:
    """docs/flows.md, "Validation codes (semantic)": a row per code the semantic checks report, W on warnings."""
    rows = table("flows.md", "| code | | meaning | typical fix |")
    wanted = [code for code in all_codes() if stage(code) == "semantic" and code not in PROJECT]
    assert [row[0] for row in rows] == wanted, sorted(set(wanted) ^ {row[0] for row in rows})
    assert {row[0] for row in rows if row[1] == "W"} == set(WARNINGS)


@pytest.mark.parametrize(
    ("page", "head", "registry"),
    [
        ("review.md", "| code | what | where |", VERSIONS),
        ("serve.md", "| code | meaning |", SERVE),
    ],
)
def test_each_code_table_has_its_stages_codes(
    page: str, head: str, registry: dict[str, str]
) -> None:
    assert [row[0] for row in table(page, head)] == list(registry)


def test_the_policy_table_has_every_policy_code_and_setting() -> None:
    """docs/review.md, `policy:`: one row per setting of PolicySpec, each with its code (BY81x)."""
    rows = table("review.md", "| setting | default | violation |")
    settings = {row[0].strip("`") for row in rows}
    wanted = {f"models.{name}" for name in ModelPolicy.model_fields} | set(
        PolicySpec.model_fields
    ) - {"models"}
    assert settings == wanted
    codes = [code for row in rows for code in re.findall(r"BY\d{3}", row[2])]
    assert sorted(codes) == [
        code for code in all_codes() if stage(code) == "policy" and code not in VERSIONS
    ]


# ---- routes -----------------------------------------------------------------------------------------------


def _template(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path.split("?")[0])


def _served() -> set[tuple[str, str]]:
    """(METHOD, path template) of every route of `blockyard serve`'s app, and the page at /."""
    paths = routes.openapi()["paths"]
    return {
        (method.upper(), _template(path)) for path, methods in paths.items() for method in methods
    } | {("GET", "/")}


def _langgraph() -> set[tuple[str, str]]:
    """The routes of the LangGraph Server API's sub-application, relative to its prefix."""
    with tempfile.TemporaryDirectory() as folder:
        app = create_langgraph_app(Server(Settings(root=Path(folder))))
    paths = get_openapi(title="LangGraph", version="0", routes=app.routes)["paths"]
    return {
        (method.upper(), _template(path)) for path, methods in paths.items() for method in methods
    }


def _routes_in(cell: str) -> set[tuple[str, str]]:
    """`GET /x` and `PATCH`/`DELETE /x` as a page writes them."""
    found = set()
    for methods, path in re.findall(rf"`((?:(?:{METHODS})`/`)*(?:{METHODS})) (/[^`\s]*)`", cell):
        found |= {(method, _template(path)) for method in methods.split("`/`")}
    return found


def _matches(route: tuple[str, str], known: set[tuple[str, str]]) -> bool:
    """A route a page names (a template, or a path with its values in: `/flows/hello/runs`) is one of `known`."""
    method, path = route
    return any(
        method == other and re.fullmatch(re.escape(template).replace(r"\{\}", "[^/]+"), path)
        for other, template in known
    )


def test_the_route_table_of_the_server_page_has_every_route() -> None:
    """docs/serve.md, "HTTP API": a row per route of the app (docs/reference/routes.md has their parameters)."""
    listed = [
        route
        for row in table("serve.md", "| method and path | what it does |")
        for route in _routes_in(row[0])
    ]
    assert len(listed) == len(set(listed))
    assert set(listed) == _served(), sorted(set(listed) ^ _served())


def test_the_langgraph_endpoint_table_says_what_is_served() -> None:
    """docs/langgraph-api.md, "Endpoints": every route of the sub-application is a supported (or partly
    supported) row, and a row marked `not` names no route that is served."""
    served = _langgraph()
    supported: set[tuple[str, str]] = set()
    for row in table("langgraph-api.md", "| endpoint | | notes |"):
        found = _routes_in(row[0])
        # what is not supported may be a family of routes (crons)
        assert found or row[1] == "not", row
        if row[1] == "not":
            assert not found & served, f"served, but the page says not: {sorted(found & served)}"
        else:
            assert row[1] in ("supported", "partly"), row
            supported |= found
    assert supported == served, sorted(supported ^ served)


def test_every_route_a_page_names_is_served() -> None:
    """Prose names routes too (`POST /flows/{name}/runs`, `GET /runs/1m80.../events`): each is a route of the
    server, or — on langgraph-api.md, where paths are relative to the prefix — of the LangGraph API."""
    served, langgraph = _served(), _langgraph()
    unknown = []
    for path in pages():
        known = served | langgraph if path.name == "langgraph-api.md" else served
        for route in _routes_in(path.read_text(encoding="utf-8")):
            if not _matches(route, known) and not (
                path.name == "langgraph-api.md" and _is_refused(route)
            ):
                unknown.append(f"{path.relative_to(REPO)}: {' '.join(route)}")
    assert unknown == []


def _is_refused(route: tuple[str, str]) -> bool:
    """A route langgraph-api.md lists as not supported."""
    return any(
        route in _routes_in(row[0])
        for row in table("langgraph-api.md", "| endpoint | | notes |")
        if row[1] == "not"
    )


# ---- layers -----------------------------------------------------------------------------------------------


def _contract_layers() -> list[list[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [
        contract["layers"]
        for contract in config["tool"]["importlinter"]["contracts"]
        if contract["type"] == "layers"
    ]
    return [[name.strip().removeprefix("engine.") for name in layer.split("|")] for layer in layers]


def test_the_architecture_page_draws_the_layers_of_the_contract() -> None:
    """docs/architecture.md, "The layers": line for line the layers contract of pyproject.toml."""
    found = re.search(r"^## The layers\n.*?^```\n(.*?)^```", text("architecture.md"), re.S | re.M)
    assert found, "architecture.md: the layers' drawing is gone"
    drawn = [[name.strip() for name in line.split("|")] for line in found.group(1).splitlines()]
    assert drawn == _contract_layers()


def test_every_part_in_the_layers_has_its_row_in_the_package_map() -> None:
    rows = table("architecture.md", "| package / module | what it is |")
    mapped = {
        name.removesuffix("/").removesuffix(".py")
        for row in rows
        for name in re.findall(r"`([\w/.]+)`", row[0])
    }
    missing = sorted({name for layer in _contract_layers() for name in layer} - mapped)
    assert missing == [], f"architecture.md's package map lacks {missing}"
