"""The collector pause of bulk loading and checking (engine/core/gcpause.py): the collector is back on
after the outermost pause, also after an error, and stays off when it was off before."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.gcpause import collector_paused
from engine.definitions import project as project_module
from engine.definitions.project import load_project
from engine.validate.semantic import check_project

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:  # as it was before the test, whatever the test left (one turns it off on purpose)
        gc.enable()
    else:
        gc.disable()


def test_nested_pauses_resume_the_collector_after_the_outermost() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_resumes_after_an_error() -> None:
    with pytest.raises(RuntimeError, match="boom"), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_pauses_in_two_threads_resume_the_collector_when_both_end() -> None:
    inside = threading.Barrier(2)
    leave = threading.Event()

    def hold() -> None:
        with collector_paused():
            inside.wait()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    with collector_paused():
        inside.wait()
    assert not gc.isenabled()  # the other thread is still inside its pause
    leave.set()
    other.join()
    assert gc.isenabled()


def test_loading_and_checking_a_yard_leave_the_collector_on() -> None:
    project = load_project(REPO)
    assert gc.isenabled()
    check_project(project)
    assert gc.isenabled()


def test_a_load_that_fails_leaves_the_collector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(project_module, "_read", broken)
    with pytest.raises(OSError, match="disk gone"):
        load_project(REPO)
    assert gc.isenabled()
