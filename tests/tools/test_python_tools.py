"""Python tools declared in blockyard.yaml, imported from the yard's code folder."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ConfigSpec
from engine.tools import ToolError, build_registry

WEATHER = '''
from typing import Literal


def forecast(city: str, days: int = 3, unit: Literal["C", "F"] = "C", detailed: bool | None = None) -> dict:
    """Forecast the weather for a city.

    Args:
        city: Name of the city.
        days: How many days ahead,
            at most seven.
    """
    return {"city": city, "days": days, "unit": unit}


async def slow_echo(text: str) -> str:
    return text
'''

Yard = Callable[..., tuple[ConfigSpec, Path]]


def tools(**decls: str) -> dict[str, Any]:
    return {"tools": {name: {"import": target} for name, target in decls.items()}}


def test_tool_from_the_code_folder_with_schema_from_type_hints(code_yard: Yard) -> None:
    config, root = code_yard({"weather.py": WEATHER}, **tools(forecast="weather:forecast"))
    registry = build_registry(config, root)
    tool = registry.get("forecast")
    assert tool is not None
    assert tool.description == "Forecast the weather for a city."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Name of the city."},
            "days": {
                "type": "integer",
                "description": "How many days ahead, at most seven.",
                "default": 3,
            },
            "unit": {"enum": ["C", "F"], "type": "string", "default": "C"},
            "detailed": {"type": ["boolean", "null"], "default": None},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert asyncio.run(registry.call("forecast", {"city": "Oslo"})) == {
        "city": "Oslo",
        "days": 3,
        "unit": "C",
    }
    with pytest.raises(ToolError, match="at 'unit': 'K' is not one of"):
        asyncio.run(registry.call("forecast", {"city": "Oslo", "unit": "K"}))


def test_declared_description_and_parameters_win(code_yard: Yard) -> None:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 5}},
        "required": ["text"],
    }
    config, root = code_yard(
        {"weather.py": WEATHER},
        tools={
            "echo": {"import": "weather:slow_echo", "description": "Echo it.", "parameters": schema}
        },
    )
    registry = build_registry(config, root)
    tool = registry.get("echo")
    assert tool is not None and (tool.description, tool.parameters) == ("Echo it.", schema)
    assert asyncio.run(registry.call("echo", {"text": "hey"})) == "hey"
    with pytest.raises(ToolError, match="is too long"):
        asyncio.run(registry.call("echo", {"text": "too long"}))


def test_packages_in_the_code_folder(code_yard: Yard) -> None:
    shout = "def shout(s: str) -> str:\n    return s.upper()\n"
    config, root = code_yard(
        {"acme/__init__.py": "", "acme/text.py": shout}, **tools(shout="acme.text:shout")
    )
    assert asyncio.run(build_registry(config, root).call("shout", {"s": "hi"})) == "HI"


def test_installed_packages_are_allowed(code_yard: Yard) -> None:
    config, root = code_yard({}, **tools(upper="jinja2.filters:do_upper"))
    registry = build_registry(config, root)
    assert asyncio.run(registry.call("upper", {"s": "quiet"})) == "QUIET"


def test_unreadable_hints_need_declared_parameters(code_yard: Yard) -> None:
    config, root = code_yard({}, **tools(pick="jsonschema.validators:validator_for"))
    with pytest.raises(
        ToolError, match=r"cannot read the type hints of jsonschema.validators:validator_for"
    ) as caught:
        build_registry(config, root)
    assert str(caught.value) == (
        "tool 'pick': cannot read the type hints of jsonschema.validators:validator_for "
        "(name 'Validator' is not defined); declare `parameters` for the tool in "
        "blockyard.yaml"
    )
    declared = {
        "type": "object",
        "properties": {"schema": {"type": "object"}},
        "required": ["schema"],
    }
    config, root = code_yard(
        {},
        tools={"pick": {"import": "jsonschema.validators:validator_for", "parameters": declared}},
    )
    tool = build_registry(config, root).get("pick")
    assert tool is not None and tool.parameters == declared
    assert tool.description.startswith("Retrieve the validator class appropriate")


def test_a_reload_sees_edited_code(code_yard: Yard, monkeypatch: pytest.MonkeyPatch) -> None:
    # Python writes bytecode (as for most users): an edit within the same second that keeps the file's
    # size looks unchanged to a .pyc, so the yard's code is compiled from source, and no __pycache__
    # lands in the yard
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    config, root = code_yard({"mod.py": "def f() -> int:\n    return 1\n"}, **tools(f="mod:f"))
    assert asyncio.run(build_registry(config, root).call("f", {})) == 1
    source = root / "code" / "mod.py"
    stamp = source.stat().st_mtime_ns
    source.write_text("def f() -> int:\n    return 2\n")
    os.utime(source, ns=(stamp, stamp))  # the same second, the same size
    assert asyncio.run(build_registry(config, root).call("f", {})) == 2
    assert not list(root.rglob("__pycache__"))


@pytest.mark.parametrize(
    ("files", "target", "message"),
    [
        (
            {},
            "nowhere:f",
            "cannot import 'nowhere' from the yard's code folder {code} or installed packages: "
            "no module named 'nowhere'",
        ),
        (
            {"bad.py": "def f(:\n"},
            "bad:f",
            "cannot import 'bad' from the yard's code folder {code} or installed "
            "packages: {code}/bad.py:1:7: syntax error: invalid syntax",
        ),
        ({"boom.py": "raise RuntimeError('at import')\n"}, "boom:f", "RuntimeError: at import"),
        (
            {"mod.py": "def forecast(): pass\n"},
            "mod:forcast",
            "module 'mod' ({code}/mod.py) has no 'forcast' (did you mean 'forecast'?)",
        ),
        ({"mod.py": "VALUE = 3\n"}, "mod:VALUE", "'mod:VALUE' is not a function"),
        (
            {"mod.py": "def f(*items: int): pass\n"},
            "mod:f",
            "parameter 'items' of mod:f cannot be passed by keyword",
        ),
        (
            {"mod.py": "import socket\ndef f(s: socket.socket): pass\n"},
            "mod:f",
            "parameter 's' has type socket, which has no JSON Schema equivalent; declare `parameters`",
        ),
    ],
)
def test_load_errors_name_the_tool_and_the_path(
    code_yard: Yard, files: dict[str, str], target: str, message: str
) -> None:
    config, root = code_yard(files, **tools(mytool=target))
    with pytest.raises(ToolError, match=r"^tool 'mytool': ") as caught:
        build_registry(config, root)
    text = str(caught.value)
    assert text.startswith("tool 'mytool': ")
    assert message.format(code=(root / "code").resolve()) in text


def test_modules_outside_the_code_folder_are_refused(code_yard: Yard, tmp_path: Path) -> None:
    stray = tmp_path / "elsewhere"
    stray.mkdir()
    (stray / "stray_tools.py").write_text("def f() -> int:\n    return 1\n")
    sys.path.insert(0, str(stray))
    config, root = code_yard({}, **tools(f="stray_tools:f"))
    with pytest.raises(ToolError, match="which is neither in the yard") as caught:
        build_registry(config, root)
    assert str(caught.value) == (
        f"tool 'f': module 'stray_tools' was found at {stray / 'stray_tools.py'}, which "
        f"is neither in the yard's code folder {(root / 'code').resolve()} nor an "
        "installed package"
    )


def test_builtin_names_cannot_be_redeclared(code_yard: Yard) -> None:
    config, root = code_yard({"mod.py": "def f(): pass\n"}, **tools(read_file="mod:f"))
    expected = "tool 'read_file' in blockyard.yaml has the name of a built-in tool"
    with pytest.raises(ToolError, match=re.escape(expected)):
        build_registry(config, root)


def test_invalid_declared_parameters(code_yard: Yard) -> None:
    config, root = code_yard(
        {"mod.py": "def f(): pass\n"},
        tools={"f": {"import": "mod:f", "parameters": {"type": "nonsense"}}},
    )
    expected = "tool 'f': `parameters` in blockyard.yaml is not a valid JSON Schema"
    with pytest.raises(ToolError, match=re.escape(expected)):
        build_registry(config, root)


def test_two_yards_with_the_same_module_name(tmp_path: Path) -> None:
    registries = []
    for n in (1, 2):
        root = tmp_path / f"yard{n}"
        root.mkdir()
        (root / "helpers.py").write_text(f"def which() -> int:\n    return {n}\n")
        config = ConfigSpec.model_validate(tools(which="helpers:which"))
        registries.append(build_registry(config, root))
    assert [asyncio.run(r.call("which", {})) for r in registries] == [1, 2]


def _outside_module(tmp_path: Path, name: str = "evil.py") -> tuple[Path, Path]:
    """A module outside the yard that leaves a marker file when it is imported (run)."""
    folder = tmp_path / "outside"
    folder.mkdir(exist_ok=True)
    marker = tmp_path / "imported"
    (folder / name).write_text(
        f"open({str(marker)!r}, 'w').close()\n\ndef f(s: str) -> str:\n    return s\n",
        encoding="utf-8",
    )
    return folder / name, marker


def test_a_module_file_linking_out_of_the_code_folder_is_refused_before_it_runs(
    code_yard: Yard, tmp_path: Path
) -> None:
    module, marker = _outside_module(tmp_path)
    config, root = code_yard({}, **tools(f="weather:f"))
    (root / "code" / "weather.py").symlink_to(module)
    with pytest.raises(
        ToolError, match=r"symbolic link code/weather.py resolves outside"
    ) as caught:
        build_registry(config, root)
    assert str(caught.value) == (
        "tool 'f': symbolic link code/weather.py resolves outside the yard's code folder; "
        "it is not read"
    )
    assert not marker.exists()


@pytest.mark.parametrize("layout", ["linked submodule", "linked package", "linked code folder"])
def test_packages_and_code_folders_linking_out_are_refused(
    code_yard: Yard, tmp_path: Path, layout: str
) -> None:
    module, marker = _outside_module(tmp_path, "text.py")
    (module.parent / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8"
    )
    config, root = code_yard(
        {"acme/__init__.py": "from acme import text\n"}, **tools(f="acme.text:f")
    )
    if layout == "linked submodule":
        (root / "code" / "acme" / "text.py").symlink_to(module)
        expected = "symbolic link code/acme/text.py resolves outside the yard's code folder"
    elif layout == "linked package":
        (root / "code" / "acme" / "__init__.py").unlink()
        (root / "code" / "acme").rmdir()
        (root / "code" / "acme").symlink_to(module.parent, target_is_directory=True)
        expected = "symbolic link code/acme resolves outside the yard's code folder"
    else:
        for path in sorted((root / "code").rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (root / "code").rmdir()
        (module.parent / "acme").mkdir()
        (module.parent / "acme" / "__init__.py").write_text("", encoding="utf-8")
        (module.parent / "acme" / "text.py").write_text(
            module.read_text(encoding="utf-8"), encoding="utf-8"
        )
        (root / "code").symlink_to(module.parent, target_is_directory=True)
        expected = "symbolic link code (the code folder) resolves outside the yard"
    with pytest.raises(ToolError, match="resolves outside the yard") as caught:
        build_registry(config, root)
    assert str(caught.value) == f"tool 'f': {expected}; it is not read"
    assert not marker.exists()


def test_a_module_linked_within_the_code_folder_loads(code_yard: Yard) -> None:
    config, root = code_yard(
        {"lib/real.py": "def f(s: str) -> str:\n    return s * 2\n"}, **tools(f="alias:f")
    )
    (root / "code" / "alias.py").symlink_to(Path("lib") / "real.py")
    assert asyncio.run(build_registry(config, root).call("f", {"s": "ab"})) == "abab"
