"""A fresh virtualenv, with pip, whose dependencies are this environment's: what the packaging tests
install a wheel (or a checkout) into without a network.

`python -m venv --system-site-packages` would see the *base* interpreter's packages, not those of the
virtualenv the suite runs in (uv's .venv): instead a .pth file in the new one's site-packages names
this environment's. Its lines are paths, not site directories, so this environment's own .pth files
(the editable install of the checkout) are not read: `engine` is importable there only once installed.
pip comes from ensurepip (offline), since uv's .venv has none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path


def venv_on_this_environment(path: Path) -> Path:
    """Create the virtualenv at `path`; return its bin/ folder."""
    subprocess.run(
        [sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=120
    )
    bin_dir = path / "bin"
    site = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    here = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (Path(site) / "_this_environment.pth").write_text(
        "".join(f"{p}\n" for p in here), encoding="utf-8"
    )
    return bin_dir


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without what would point a child at the checkout or the suite's state database."""
    from engine.state.location import URL_ENV

    drop = {"PYTHONPATH", URL_ENV, "VIRTUAL_ENV", "OPENAI_API_KEY"}
    return {**{key: value for key, value in os.environ.items() if key not in drop}, **extra}
