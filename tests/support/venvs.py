"""A fresh virtualenv, with pip, whose dependencies are this environment's: what the packaging tests
install a wheel (or a checkout) into without a network.

`python -m venv --system-site-packages` would see the *base* interpreter's packages, not those of the
virtualenv the suite runs in (uv's .venv): instead a .pth file in the new one's site-packages names
this environment's. Its lines are paths, not site directories, so this environment's own .pth files
(the editable install of the checkout) are not read: `engine` is importable there only once installed.
pip comes from ensurepip (offline), since uv's .venv has none, through `venv_with_pip()`.
"""

from __future__ import annotations

import ensurepip
import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from tests.support.bytecode import cache_folder


def venv_on_this_environment(path: Path) -> Path:
    """Create the virtualenv at `path`, with pip; return its bin/ folder."""
    bin_dir = venv_with_pip(path)
    here = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (site_packages(path) / "_this_environment.pth").write_text(
        "".join(f"{p}\n" for p in here), encoding="utf-8"
    )
    return bin_dir


def venv_with_pip(path: Path) -> Path:
    """What `python -m venv PATH` makes, pip in it as ensurepip installs it (run as `python -m pip`, as
    the action and pre-commit do: its bin/pip scripts are left out); returns its bin/ folder.

    ensurepip installs pip with pip, compiling its thousand modules: ~2.6 s of CPU a venv on 2 cores.
    So the venv is made without pip, and pip (the same version, ensurepip's) is copied in from one
    installed once per Python and pip version, in the tests' cache folder beside the bytecode's."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    for entry in _pip_seed().iterdir():
        shutil.copytree(entry, site_packages(path) / entry.name, symlinks=True)
    return path / "bin"


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def _pip_seed() -> Path:
    """pip and its .dist-info as ensurepip installs them into a venv of this Python, made once."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    seed = cache_folder().parent / f"pip-seed-python{version}-pip{ensurepip.version()}"
    if seed.is_dir():
        return seed
    seed.parent.mkdir(parents=True, exist_ok=True)
    # one maker at a time: the suite's workers that need it at once wait for the first, not pay twice
    with open(seed.with_name(seed.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not seed.is_dir():
            _make_pip_seed(seed)
    return seed


def _make_pip_seed(seed: Path) -> None:
    with tempfile.TemporaryDirectory(dir=seed.parent) as work:
        venv = Path(work) / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120
        )
        made = Path(work) / "seed"
        made.mkdir()
        for entry in site_packages(venv).iterdir():
            if entry.name.startswith("pip"):  # pip/ and pip-N.dist-info/
                shutil.copytree(entry, made / entry.name, symlinks=True)
        made.rename(seed)  # whole or not at all: a session killed meanwhile leaves none


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without what would point a child at the checkout or the suite's state database."""
    from engine.state.location import URL_ENV

    drop = {"PYTHONPATH", URL_ENV, "VIRTUAL_ENV", "OPENAI_API_KEY"}
    return {**{key: value for key, value in os.environ.items() if key not in drop}, **extra}
