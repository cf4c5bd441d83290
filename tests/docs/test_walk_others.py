"""The runnable blocks of every page no other walk of tests/docs/ names (the how-to guides, mostly), each page
in order in a copy of the repository of its own, as a newcomer pastes them (tests/support/docs_walk.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.docs_walk import REPO, walk, walked


@pytest.mark.cpu_heavy(
    "the page's commands as pasted, in a copy of the repository with its own venv"
)
@pytest.mark.timeout(660)
@pytest.mark.parametrize("page", walked("others"), ids=lambda page: str(page.relative_to(REPO)))
def test_the_page_runs_as_pasted(page: Path, tmp_path: Path) -> None:
    walk(page, tmp_path)
