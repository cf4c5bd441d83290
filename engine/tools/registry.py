"""The tool registry: lookup, argument validation, and calls (sync tools run in a thread)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.diagnostics import did_you_mean
from engine.core.values import JsonDict
from engine.spec import ConfigSpec
from engine.spec.typecheck import schema_verdict
from engine.tools.builtin import builtin_tools
from engine.tools.errors import ToolError
from engine.tools.loader import load_python_tools
from engine.tools.mcp import McpSource
from engine.tools.names import BUILTIN_TOOLS
from engine.tools.tool import Tool

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = ["Tool", "ToolRegistry", "build_registry"]


class ToolRegistry:
    """Built-in tools bound to one workspace folder, plus the yard's Python tools."""

    def __init__(
        self,
        config: ConfigSpec,
        python_tools: Iterable[Tool] = (),
        *,
        workspace: Path | None = None,
        mcp: McpSource | None = None,
        confine: Path | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self._python = tuple(python_tools)
        self._confine = confine
        # the built-in tools are made on first use: every run gets a registry of its own (`with_workspace`),
        # and most runs call no tool (making them is a fifth of a short model run's own CPU under load)
        self._made: dict[str, Tool] | None = None
        self._mcp = mcp
        clash = (
            sorted(set(mcp.owner) & (BUILTIN_TOOLS | {t.name for t in self._python}))
            if mcp is not None
            else []
        )
        if clash:
            raise ToolError(
                f"tool '{clash[0]}' of MCP server '{mcp.owner[clash[0]]}' has the name of a built-in or "  # type: ignore[union-attr]
                "Python tool; leave it out of the server's `tools:`"
            )
        self._validators: dict[str, Draft202012Validator] = {}

    @property
    def _tools(self) -> dict[str, Tool]:
        made = self._made
        if made is None:
            made = {t.name: t for t in builtin_tools(self.config, self.workspace, self._confine)}
            made.update((t.name, t) for t in self._python)
            self._made = made
        return made

    def __repr__(self) -> str:
        return f"ToolRegistry(tools={self.names()!r}, workspace={str(self.workspace) if self.workspace else None!r})"

    def with_workspace(self, workspace: Path, *, confine: Path | None = None) -> ToolRegistry:
        """The same tools with file tools confined to `workspace` (cheap: nothing is re-imported); a
        folder the flow or the run names (`output_dir`) must also stay inside `confine`, the yard."""
        return ToolRegistry(
            self.config, self._python, workspace=workspace, mcp=self._mcp, confine=confine
        )

    def get(self, name: str) -> Tool | None:
        """The tool `name`; an MCP tool only once its server has described it (see `aget`)."""
        tool = self._tools.get(name)
        if tool is None and self._mcp is not None:
            return self._mcp.loaded(name)
        return tool

    async def aget(self, name: str) -> Tool | None:
        """The tool `name`, asking MCP servers for their tools first if needed."""
        tool = self._tools.get(name)
        if tool is None and self._mcp is not None and name in self._mcp.owner:
            return (await self._mcp.tools()).get(name)
        return tool

    def names(self) -> list[str]:
        return sorted([*self._tools, *(self._mcp.names() if self._mcp is not None else [])])

    async def call(self, name: str, args: Mapping[str, Any]) -> Any:
        """Validate args against the tool's schema, then call it; every failure is a ToolError."""
        tool = await self.aget(name)
        if tool is None:
            raise ToolError(f"unknown tool '{name}'{did_you_mean(name, self.names())}")
        arguments = dict(args)
        problem = self._problem(tool, arguments)
        if problem is not None:
            raise ToolError(f"tool '{name}': invalid arguments: {problem}")
        try:
            if inspect.iscoroutinefunction(tool.func):
                return await tool.func(**arguments)
            result = await asyncio.to_thread(tool.func, **arguments)
            if inspect.isawaitable(result):
                return await result
            return result
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"tool '{name}' failed: {type(exc).__name__}: {exc}") from exc

    def _problem(self, tool: Tool, arguments: JsonDict) -> str | None:
        if schema_verdict(arguments, tool.parameters) is True:
            return None
        # jsonschema (~60 ms to import) only for arguments the quick check did not pass: a cold start
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import best_match

        validator = self._validators.get(tool.name)
        if validator is None:
            validator = self._validators[tool.name] = Draft202012Validator(tool.parameters)
        error = best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return f"at '{where}': {error.message}" if where else error.message


def build_registry(
    config: ConfigSpec, root: Path, *, workspace: Path | None = None
) -> ToolRegistry:
    """Built-ins plus config.tools, imported from the yard's code folder or installed packages.

    Build it once per yard load; per run, `registry.with_workspace(run_folder)`.
    """
    mcp = McpSource(config.mcp, root) if config.mcp else None
    return ToolRegistry(config, load_python_tools(config, root), workspace=workspace, mcp=mcp)
