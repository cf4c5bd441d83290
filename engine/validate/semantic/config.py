"""blockyard.yaml: model profiles and tool declarations (checked without importing any tool)."""

from __future__ import annotations

import keyword
from collections.abc import Iterator

from engine.core.diagnostics import Diagnostic, did_you_mean
from engine.core.hosts import webhook_refusal
from engine.definitions.load import Document, JsonPath
from engine.definitions.project import Project
from engine.models.replies import reply_problems
from engine.spec import ModelProfile
from engine.tools.location import module_problem
from engine.tools.names import BUILTIN_TOOLS
from engine.validate.semantic.index import issue
from engine.validate.semantic.retention import check_retention

DEFAULT_PROFILE = "default"
# settings that only one provider reads; anywhere else they are silently ignored, so say so
PROVIDER_ONLY = {"delay": "mock", "replies": "mock", "api_version": "azure"}


def builtin_tools() -> frozenset[str]:
    """Names of the built-in tools (engine.tools.names holds plain data: importing it loads no tool)."""
    return frozenset(BUILTIN_TOOLS)


def known_tools(project: Project) -> list[str]:
    mcp = {name for server in project.config.mcp.values() for name in server.tools}
    return sorted(builtin_tools() | set(project.config.tools) | mcp)


def known_profiles(project: Project) -> list[str]:
    return sorted({DEFAULT_PROFILE, *project.config.models})


def profile_problems(profile: ModelProfile) -> Iterator[tuple[JsonPath, str, str, bool]]:
    """(sub-path, code, message, at key) for one model profile."""
    if profile.provider != "mock" and not profile.name:
        yield (
            (),
            "BY503",
            (
                f"a provider: {profile.provider} profile needs `name:` (the model to ask for, "
                "e.g. gpt-4o-mini)"
            ),
            False,
        )
    for setting, provider in PROVIDER_ONLY.items():
        if setting in profile.model_fields_set and profile.provider != provider:
            yield (
                (setting,),
                "BY505",
                (
                    f"`{setting}` only applies to provider: {provider}; this profile uses "
                    f"{profile.provider}, which ignores it"
                ),
                True,
            )


def check_config(project: Project) -> list[Diagnostic]:
    """Problems of blockyard.yaml itself."""
    doc = project.config_doc
    if doc is None:
        return []
    found: list[Diagnostic] = []
    for name, profile in project.config.models.items():
        for sub, code, message, key in profile_problems(profile):
            found.append(
                issue(
                    doc, ("models", name, *sub), code, f"model profile '{name}': {message}", key=key
                )
            )
        for reply_key, replies in (profile.replies or {}).items():
            for position, reply in enumerate(replies):
                for where, wrong in reply_problems(reply):
                    found.append(
                        issue(
                            doc,
                            ("models", name, "replies", reply_key, position, *where),
                            "BY516",
                            f"model profile '{name}', reply {position + 1} for '{reply_key}': {wrong}",
                        )
                    )
    name_model = project.config.threads.name_model
    if name_model is not None and name_model not in known_profiles(project):
        profiles = known_profiles(project)
        found.append(
            issue(
                doc,
                ("threads", "name_model"),
                "BY502",
                f"threads.name_model: unknown model profile '{name_model}'"
                f"{did_you_mean(name_model, profiles)} (profiles: {', '.join(profiles)})",
            )
        )
    found.extend(check_retention(project))
    for position, flow in enumerate(project.config.server.mcp_flows or ()):
        if flow not in project.flows:
            found.append(
                issue(
                    doc,
                    ("server", "mcp_flows", position),
                    "BY517",
                    f"server.mcp_flows: unknown flow '{flow}'{did_you_mean(flow, project.flows)}",
                )
            )
    found.extend(_notify_problems(project, doc))
    builtins = builtin_tools()
    for name, decl in project.config.tools.items():
        problem = import_path_problem(decl.import_)
        if problem is not None:
            found.append(
                issue(doc, ("tools", name, "import"), "BY504", f"tool '{name}': {problem}")
            )
        else:  # found, not imported: a module file that links out of the code folder would run foreign code
            problem = module_problem(
                decl.import_.partition(":")[0], project.root, project.config.paths.code
            )
            if problem is not None:
                found.append(
                    issue(doc, ("tools", name, "import"), "BY008", f"tool '{name}': {problem}")
                )
        if name in builtins:
            found.append(
                issue(
                    doc,
                    ("tools", name),
                    "BY506",
                    f"tool '{name}' has the name of a built-in tool and replaces it in this yard",
                    key=True,
                )
            )
    return found


def import_path_problem(path: str) -> str | None:
    """Why `module.sub:function` cannot be an import path, or None. Nothing is imported."""
    module, sep, function = path.partition(":")
    if not sep or not module or not function:
        return f"import path '{path}' must be module:function, e.g. tools.weather:forecast"
    for part in module.split("."):
        if not part.isidentifier():
            return f"import path '{path}': '{part or '(empty)'}' is not a valid module name segment"
        if keyword.iskeyword(part):
            return f"import path '{path}': '{part}' is a Python keyword, not a module name"
    if not function.isidentifier() or keyword.iskeyword(function):
        return f"import path '{path}': '{function}' is not a valid function name"
    return None


def _notify_problems(project: Project, doc: Document) -> Iterator[Diagnostic]:
    """`notify:` URLs the server would refuse to post to (the webhooks' host rule), and unknown flows."""
    allowed = project.config.http.allowed_hosts
    for position, notify in enumerate(project.config.notify):
        problem = webhook_refusal(notify.url, allowed)
        if problem is not None:
            yield issue(doc, ("notify", position, "url"), "BY518", f"notify: {problem}")
        for number, flow in enumerate(notify.flows or ()):
            if flow not in project.flows:
                yield issue(
                    doc,
                    ("notify", position, "flows", number),
                    "BY519",
                    f"notify: unknown flow '{flow}'{did_you_mean(flow, project.flows)}",
                )
