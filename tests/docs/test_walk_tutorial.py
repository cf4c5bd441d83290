"""The runnable blocks of the pages of walk "tutorial" (tests/support/docs_walk.py, WALKS), in order, as a
newcomer pastes them; each page in a copy of the repository of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.docs_walk import REPO, walk, walked


@pytest.mark.cpu_heavy(
    "the page's commands as pasted, in a copy of the repository with its own venv"
)
@pytest.mark.timeout(660)
@pytest.mark.parametrize("page", walked("tutorial"), ids=lambda page: str(page.relative_to(REPO)))
def test_the_page_runs_as_pasted(page: Path, tmp_path: Path) -> None:
    walk(page, tmp_path)
