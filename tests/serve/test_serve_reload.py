"""Hot reload from real file edits: the watcher sees saves, the reloader swaps good flows in."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from engine.serve.reload import Reloader
from engine.serve.watcher import Layout, YardWatcher, definition_folders, fingerprint
from tests.serve.serve_helpers import ADD_FLOW, ADDER

SECRET = "ghp_SECRETTOKEN42"


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def saved(path: Path, text: str) -> None:
    """Save `path` as an editor that replaces the file does: `write_text` empties it first, and a
    reload that reads it in between (a busy machine) would serve the empty prompt as the flow's
    last good version."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def watching(
    root: Path,
    scenario: Callable[[Reloader], object],
    watcher_type: type[YardWatcher] = YardWatcher,
) -> None:
    """Run `scenario(reloader)` (a coroutine) while the reloader watches `root`."""

    async def main() -> None:
        reloader = Reloader(root)
        reloader.load_now()
        stop = asyncio.Event()
        watcher = watcher_type(root)
        task = asyncio.create_task(reloader.watch(stop, watcher))
        await watcher.ready.wait()
        try:
            await scenario(reloader)  # type: ignore[misc]
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=10)

    asyncio.run(main())


def test_a_saved_edit_is_served_and_a_broken_one_keeps_the_last_good_version(yard: Path) -> None:
    async def scenario(reloader: Reloader) -> None:
        seen: list[int] = []
        reloader.listeners.append(lambda old, new: seen.append(new.generation))
        (yard / "flows/add.yaml").write_text(ADD_FLOW.replace("version: 1", "version: 2"))
        await until(lambda: reloader.catalog.flows["add"].version == 2)
        assert reloader.catalog.ok
        (yard / "flows/add.yaml").write_text(
            ADD_FLOW.replace("version: 1", "version: 3") + "oops: [\n"
        )
        await until(lambda: "add" in reloader.catalog.stale)
        assert reloader.catalog.flows["add"].version == 2
        assert not reloader.catalog.ok
        (yard / "flows/add.yaml").write_text(ADD_FLOW.replace("version: 1", "version: 4"))
        await until(lambda: reloader.catalog.flows["add"].version == 4)
        assert reloader.catalog.ok and not reloader.catalog.stale
        assert seen and seen == sorted(seen)

    watching(yard, scenario)


def test_new_and_deleted_files_and_the_config_are_watched(yard: Path) -> None:
    async def scenario(reloader: Reloader) -> None:
        (yard / "flows/twice.yaml").write_text(ADD_FLOW.replace("flow: add", "flow: twice"))
        await until(lambda: "twice" in reloader.catalog.flows)
        (yard / "flows/twice.yaml").unlink()
        await until(lambda: "twice" not in reloader.catalog.flows)
        (yard / "blockyard.yaml").write_text("server: {max_concurrent_runs: 4}\n")
        await until(lambda: reloader.catalog.max_concurrent_runs == 4)
        nested = yard / "flows/team"
        nested.mkdir()
        (nested / "deep.yaml").write_text(ADD_FLOW.replace("flow: add", "flow: deep"))
        await until(lambda: "deep" in reloader.catalog.flows)

    watching(yard, scenario)


def test_folders_created_after_start_are_watched(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()

    async def scenario(reloader: Reloader) -> None:
        assert not reloader.catalog.flows
        (root / "blocks").mkdir()
        (root / "blocks/adder.yaml").write_text(ADDER)
        (root / "flows").mkdir()
        await asyncio.sleep(0.3)  # the new folder is picked up, then its files
        (root / "flows/add.yaml").write_text(ADD_FLOW)
        await until(lambda: "add" in reloader.catalog.flows)

    watching(root, scenario)


def test_the_folders_come_from_blockyard_yaml(tmp_path: Path) -> None:
    (tmp_path / "blockyard.yaml").write_text("paths: {flows: src/flows, blocks: src/blocks}\n")
    assert definition_folders(tmp_path) == [
        (tmp_path / "src/flows").resolve(),
        (tmp_path / "src/blocks").resolve(),
    ]
    (tmp_path / "blockyard.yaml").write_text("paths: [not, a, mapping]\n")
    assert definition_folders(tmp_path) == [
        (tmp_path / "flows").resolve(),
        (tmp_path / "blocks").resolve(),
    ]


def test_the_watcher_ignores_other_files(yard: Path) -> None:
    async def main() -> list[set[Path]]:
        stop = asyncio.Event()
        batches: list[set[Path]] = []

        async def collect(watcher: YardWatcher) -> None:
            async for batch in watcher.batches(stop):
                batches.append(batch)

        watcher = YardWatcher(yard)
        task = asyncio.create_task(collect(watcher))
        await watcher.ready.wait()
        (yard / "flows/notes.txt").write_text("not yaml")
        (yard / ".blockyard").mkdir(exist_ok=True)
        (yard / ".blockyard/state.db").write_text("x")
        (yard / "README.md").write_text("x")
        await asyncio.sleep(0.3)
        (yard / "flows/add.yaml").write_text(ADD_FLOW.replace("version: 1", "version: 2"))
        await until(lambda: bool(batches))
        stop.set()
        await asyncio.wait_for(task, timeout=10)
        return batches

    batches = asyncio.run(main())
    assert set().union(*batches) == {(yard / "flows/add.yaml").resolve()}


def test_an_edit_made_before_the_watch_starts_is_not_lost(yard: Path) -> None:
    async def main() -> None:
        reloader = Reloader(yard)
        reloader.load_now()
        # nobody watches yet
        (yard / "flows/add.yaml").write_text(ADD_FLOW.replace("version: 1", "version: 2"))
        stop = asyncio.Event()
        task = asyncio.create_task(reloader.watch(stop))
        await until(lambda: reloader.catalog.flows["add"].version == 2)
        stop.set()
        await asyncio.wait_for(task, timeout=10)

    asyncio.run(main())


def test_the_reload_ignores_a_link_out_of_the_yard(
    yard: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stolen = tmp_path / "outside.yaml"
    stolen.write_text(
        ADD_FLOW.replace("flow: add", "flow: stolen").replace("Add a and b.", SECRET),
        encoding="utf-8",
    )
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "more.yaml").write_text(
        ADD_FLOW.replace("flow: add", "flow: more"), encoding="utf-8"
    )

    async def scenario(reloader: Reloader) -> None:
        (yard / "flows" / "stolen.yaml").symlink_to(stolen)
        (yard / "flows" / "team").symlink_to(tmp_path / "outside", target_is_directory=True)
        await until(
            lambda: (
                {d.file for d in reloader.catalog.diagnostics if d.code == "BY008"}
                == {"flows/stolen.yaml", "flows/team"}
            )
        )
        assert "stolen" not in reloader.catalog.flows and "more" not in reloader.catalog.flows

    with caplog.at_level(logging.INFO):
        watching(yard, scenario)
    logged = "\n".join(repr(vars(record)) for record in caplog.records)  # with the key=value fields
    assert SECRET not in logged and str(tmp_path / "outside") not in logged
    assert "flows/stolen.yaml" in logged and "BY008" in logged


def test_the_change_check_neither_hangs_on_a_fifo_nor_reads_through_links(
    yard: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text("a: 1\n", encoding="utf-8")
    (yard / "flows" / "link.yaml").symlink_to(outside)
    before = fingerprint(yard)
    # what lies outside the yard is none of its business
    outside.write_text("a: 2\n", encoding="utf-8")
    assert fingerprint(yard) == before
    fifo = yard / "flows" / "pipe.yaml"
    os.mkfifo(fifo)
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(fingerprint(yard)), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the stuck reader
        pytest.fail("fingerprint blocked on a FIFO")
    assert result and result[0] != before


def test_a_definition_folder_linking_out_is_not_watched(tmp_path: Path) -> None:
    root, outside = tmp_path / "yard", tmp_path / "etc"
    root.mkdir()
    outside.mkdir()
    (root / "flows").symlink_to(outside, target_is_directory=True)
    (root / "blocks").mkdir()
    assert definition_folders(root) == [root / "flows", (root / "blocks").resolve()]


def test_a_block_linking_out_of_the_yard_breaks_the_flows_that_use_it(
    yard: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "adder.yaml"
    outside.write_text(ADDER, encoding="utf-8")
    (yard / "blocks" / "adder.yaml").unlink()
    (yard / "blocks" / "adder.yaml").symlink_to(outside)
    catalog = Reloader(yard).load_now()
    assert "add" not in catalog.flows
    assert ("blocks/adder.yaml", "BY008") in {(d.file, d.code) for d in catalog.diagnostics}


GREETER = """
block: greeter
kind: llm
inputs: {name: {type: string}}
outputs: {greeting: {type: string}}
prompt:
  system_file: prompts/greet.md
  user: "Greet {{ name }}"
"""
HELLO = """
flow: hello
inputs: {name: {type: string}}
outputs: [greeting]
steps:
  - {id: greet, uses: greeter}
"""


def test_an_edited_prompt_file_is_served_to_the_flows_that_use_it(yard: Path) -> None:
    (yard / "blocks/greeter.yaml").write_text(GREETER)
    (yard / "flows/hello.yaml").write_text(HELLO)
    (yard / "prompts").mkdir()
    (yard / "prompts/greet.md").write_text("You greet people. {% include 'prompts/rules.md' %}")
    (yard / "prompts/rules.md").write_text("Be brief.")

    async def scenario(reloader: Reloader) -> None:
        first = reloader.catalog
        running = first.flows["hello"].bundle  # what a run started now is pinned to
        assert running.prompts["prompts/rules.md"] == "Be brief."
        assert reloader.prompt_files() == ["prompts/greet.md", "prompts/rules.md"]
        saved(yard / "prompts/rules.md", "Be warm.")  # an included file
        await until(
            lambda: reloader.catalog.flows["hello"].bundle.prompts["prompts/rules.md"] == "Be warm."
        )
        # a flow without the prompt is not reloaded
        assert reloader.catalog.flows["add"] is first.flows["add"]
        # a run in progress keeps its text
        assert running.prompts["prompts/rules.md"] == "Be brief."
        # a new include of a file that does not exist yet: the flow keeps its last good version ...
        saved(yard / "prompts/greet.md", "Hello. {% include 'prompts/more/tone.md' %}")
        await until(lambda: "hello" in reloader.catalog.stale)
        assert reloader.catalog.flows["hello"].bundle.prompts["prompts/rules.md"] == "Be warm."
        # ... until it is written, in a folder created after the watch started
        (yard / "prompts/more").mkdir()
        saved(yard / "prompts/more/tone.md", "Cheerful.")
        await until(lambda: "hello" not in reloader.catalog.stale)
        assert reloader.catalog.flows["hello"].bundle.prompts["prompts/more/tone.md"] == "Cheerful."
        saved(yard / "prompts/more/tone.md", "Calm.")
        await until(
            lambda: (
                reloader.catalog.flows["hello"].bundle.prompts.get("prompts/more/tone.md")
                == "Calm."
            )
        )

    watching(yard, scenario)


def test_a_folder_made_while_the_watches_are_armed_is_watched(yard: Path) -> None:
    """A folder made between working out what to watch and arming the watches (a busy machine) is seen
    all the same, and so are the files written in it afterwards: the watcher looks again once armed."""
    (yard / "blocks/greeter.yaml").write_text(GREETER)
    (yard / "flows/hello.yaml").write_text(HELLO)
    (yard / "prompts").mkdir()
    (yard / "prompts/greet.md").write_text("Hello.")
    tone = yard.resolve() / "prompts/more/tone.md"
    staged: list[Layout] = []

    class Racing(YardWatcher):
        """Makes the folder of tone.md just after the layout about to be armed was worked out: the
        second one that names tone.md (the first is the look after the batch that made it needed)."""

        looks = 0

        def _layout(self, prompts: Callable[[], Iterable[str]]) -> Layout:
            layout = super()._layout(prompts)
            if tone in layout.extra:
                self.looks += 1
                if self.looks == 2:
                    tone.parent.mkdir()
                    staged.append(layout)
            return layout

    async def scenario(reloader: Reloader) -> None:
        before = reloader.reloads
        saved(yard / "prompts/greet.md", "Hello. {% include 'prompts/more/tone.md' %}")
        await until(lambda: bool(staged))
        # the race happened: the layout armed missed the folder
        assert tone.parent not in staged[0].anchors
        # the edit's reload, then the re-armed watcher's
        await until(lambda: reloader.reloads >= before + 2)
        saved(tone, "Cheerful.")
        await until(lambda: "hello" not in reloader.catalog.stale)
        assert reloader.catalog.flows["hello"].bundle.prompts["prompts/more/tone.md"] == "Cheerful."

    watching(yard, scenario, Racing)


def test_a_prompt_edited_before_the_watch_starts_is_not_lost(yard: Path) -> None:
    (yard / "blocks/greeter.yaml").write_text(GREETER)
    (yard / "flows/hello.yaml").write_text(HELLO)
    (yard / "prompts").mkdir()
    (yard / "prompts/greet.md").write_text("Be brief.")

    async def main() -> None:
        reloader = Reloader(yard)
        reloader.load_now()
        (yard / "prompts/greet.md").write_text("Be warm.")  # nobody watches yet
        stop = asyncio.Event()
        task = asyncio.create_task(reloader.watch(stop))
        await until(
            lambda: reloader.catalog.flows["hello"].bundle.prompts["prompts/greet.md"] == "Be warm."
        )
        stop.set()
        await asyncio.wait_for(task, timeout=10)

    asyncio.run(main())
