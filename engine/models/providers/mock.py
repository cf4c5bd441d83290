"""The offline mock model: deterministic, schema-valid outputs derived from the inputs (and for
`blockyard compose`, a TaskPlan drafted from the catalog: engine/models/mock_plans.py).

Scripted replies (a run's registered MockScript first, then the profile's `replies`) take
precedence; a scripted reply goes through the same validation and repair as a real model's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import sys
from collections.abc import Callable
from typing import Any

from engine.models.agentic import TokenSink, TurnRequest
from engine.models.base import Candidate, StructuredRequest, Turn
from engine.models.calls import Tokens
from engine.models.errors import TRANSIENT_KINDS, ModelError
from engine.models.mock_judge import judge_verdict
from engine.models.mock_plans import compose_plan
from engine.models.mock_values import fake, seed_of, summarize
from engine.models.providers.chat import function_name, messages, text_of
from engine.models.replies import reply_problems
from engine.models.script import MockScript
from engine.models.streaming import text_field
from engine.spec import ModelProfile, parse_duration


class MockGenerator:
    """Generator of the `mock` provider."""

    provider = "mock"

    def __init__(self, profile: ModelProfile, *, run_script: MockScript | None = None) -> None:
        self.model = profile.name or "mock"
        self.delay = parse_duration(profile.delay) if profile.delay else 0.0
        self.run_script = run_script
        self.profile_script = MockScript(profile.replies) if profile.replies else None

    def __repr__(self) -> str:
        return f"MockGenerator(model={self.model!r}, delay={self.delay!r})"

    @property
    def scripted(self) -> bool:
        """Whether replies come from a script, by the order of the calls (never kept in a response cache)."""
        return self.run_script is not None or self.profile_script is not None

    async def generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate:
        """A scripted reply or generated outputs; with `request.on_token`, the single text output (or
        a plain-text reply) is streamed word by word, as a real model's would be. Inside a LangChain
        run with callbacks the reply is played through them too (engine/models/providers/replay.py)."""
        found = await self._generate(request, turns)
        field = text_field(request.output_schema)
        value = (
            found.value.get(field) if field is not None and isinstance(found.value, dict) else None
        )
        text = (
            value
            if isinstance(value, str)
            else found.text
            if found.text is not None and not found.text.lstrip().startswith("{")
            else None
        )
        words = re.findall(r"\S+\s*", text or "")
        if request.on_token is not None:
            for word in words:
                request.on_token(word)
        if in_langchain_run():
            calls = (
                [(function_name(request.block), found.value)] if found.parsed and not words else []
            )
            await self._replay(
                messages(request, turns), words or ([found.text] if found.text else []), calls
            )
        said = len(found.text) if found.text is not None else _chars(found.value)
        return dataclasses.replace(
            found,
            usage=Tokens(
                input=mock_tokens(_asked_chars(request, turns)),
                output=mock_tokens(said),
                cached=0,
                reasoning=0,
            ),
        )

    async def _generate(self, request: StructuredRequest, turns: tuple[Turn, ...]) -> Candidate:
        found, reply = await self._script_reply(
            request, lambda: sent_text(messages(request, turns)), not turns
        )
        if found:
            return self._scripted(reply, request)
        if request.purpose == "compose":
            return Candidate.of_value(compose_plan(request.inputs))
        if request.purpose == "judge":
            # an eval's judge: a score by a rule (engine/models/mock_judge.py)
            return Candidate.of_value(judge_verdict(request.inputs))
        label = f"{request.block}: {summarize(request.inputs)}"
        return Candidate.of_value(
            fake(request.output_schema, seed=seed_of(request.block, request.inputs), label=label)
        )

    async def turn(self, request: TurnRequest, on_token: TokenSink | None = None) -> Any:
        """One agent turn: the next scripted reply (tool calls, text, an answer or an error), else
        an immediate final answer derived from the inputs. Text is streamed word by word."""
        found, reply = await self._script_reply(request, lambda: sent_text(request.messages), True)
        if found:
            self._raise_scripted_error(reply, request)
            message = agent_reply(reply, request)
        else:
            value = fake(
                request.answer_schema,
                seed=seed_of(request.block, request.inputs),
                label=f"{request.block}: {summarize(request.inputs)}",
            )
            message = agent_reply(value, request)
        words = re.findall(r"\S+\s*", message.content) if isinstance(message.content, str) else []
        if on_token is not None:
            for word in words:
                on_token(word)
        if in_langchain_run():
            await self._replay(
                list(request.messages), words, [(c["name"], c["args"]) for c in message.tool_calls]
            )
        asked = sum(len(text_of(getattr(item, "content", ""))) for item in request.messages)
        said = len(text_of(message.content)) + _chars([call["args"] for call in message.tool_calls])
        inputs, outputs = mock_tokens(asked), mock_tokens(said)
        message.usage_metadata = {
            "input_tokens": inputs,
            "output_tokens": outputs,
            "total_tokens": inputs + outputs,
            "input_token_details": {"cache_read": 0},
            "output_token_details": {"reasoning": 0},
        }
        return message

    async def _replay(
        self, chat: list[Any], words: list[str], calls: list[tuple[str, Any]]
    ) -> None:
        # LangChain: loaded already here
        from engine.models.providers.replay import (
            replay,
            reply_chunks,
        )

        await replay(chat, reply_chunks(words, calls), self.model)

    async def _script_reply(
        self, request: StructuredRequest | TurnRequest, sent: Callable[[], str], record: bool
    ) -> tuple[bool, Any]:
        """The next reply of the run's script, else of the profile's: (found, reply), after the profile's delay.
        `record` is False for the repair turns of a structured call (the script records the first ask only)."""
        if record and self.run_script is not None:
            self.run_script.record(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        for script in (self.run_script, self.profile_script):
            if script is not None:
                found, reply = script.next_reply(request, sent)
                if found:
                    return True, reply
        return False, None

    def _raise_scripted_error(self, reply: Any, request: StructuredRequest | TurnRequest) -> None:
        # a script registered from Python is not validated
        for where, problem in reply_problems(reply):
            at = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where)
            raise ModelError(
                f"mock model '{self.model}', step '{request.step}': malformed scripted reply"
                f"{' at ' + at.lstrip('.') if at else ''}: {problem}",
                provider="mock",
                model=self.model,
            )
        if isinstance(reply, dict) and "$error" in reply:
            kind = str(reply["$error"])
            message = str(reply.get("message") or f"scripted {kind} error")
            raise ModelError(
                f"mock model '{self.model}', step '{request.step}': {message}",
                provider="mock",
                model=self.model,
                kind=kind if kind in TRANSIENT_KINDS else None,
            )

    def _scripted(self, reply: Any, request: StructuredRequest) -> Candidate:
        self._raise_scripted_error(reply, request)
        if isinstance(reply, dict):
            return Candidate.of_value(reply)
        if isinstance(reply, str):
            try:
                parsed = json.loads(reply)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return Candidate.of_value(parsed)
        properties = request.output_schema.get("properties") or {}
        if len(properties) == 1:
            # a decide block's single enum output can be scripted as just the choice
            return Candidate.of_value({next(iter(properties)): reply})
        return Candidate.of_text(reply) if isinstance(reply, str) else Candidate.of_value(reply)


def mock_tokens(chars: int) -> int:
    """The token count the mock reports for a text: about four characters a token, as for English
    text with OpenAI's tokenizers — deterministic, so that usage, cost and budgets are tested offline."""
    return max(1, (chars + 3) // 4)


def _chars(value: Any) -> int:
    """The length of a reply value as JSON; a value JSON cannot write (an integer of 5,000 digits, which the
    step refuses anyway) counts nothing rather than failing the count."""
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except ValueError:
        return 0


def _asked_chars(request: StructuredRequest, turns: tuple[Turn, ...]) -> int:
    """The characters a provider would be sent (without building the LangChain messages)."""
    user = request.user or json.dumps(request.inputs, ensure_ascii=False, default=str)
    return (
        len(request.system or "")
        + sum(len(text) for _, text in request.history)
        + len(user)
        + sum(len(turn.text) for turn in turns)
    )


def in_langchain_run() -> bool:
    """Whether this code runs inside a LangChain run (a LangGraph node) that has callback handlers
    (LangGraph's `messages` stream mode, tracing). Reads LangChain's context variable only when
    LangChain is loaded already: never loads it."""
    module = sys.modules.get("langchain_core.runnables.config")
    if module is None:
        return False
    config = module.var_child_runnable_config.get()
    if not config:
        return False
    callbacks = config.get("callbacks")
    handlers = getattr(callbacks, "handlers", callbacks)
    return bool(handlers)


def sent_text(chat: Any) -> str:
    """What rule replies match: the text of every message sent to the model (system, history, user,
    tool results), one per line, as a real provider would send it."""
    return "\n".join(text_of(getattr(message, "content", "")) for message in chat)


def agent_reply(reply: Any, request: TurnRequest) -> Any:
    """A scripted reply as an assistant message.

    `{$tool_calls: [{name, args}], $text: ...}` calls tools (args that are not an object make a
    malformed call, as a model's broken JSON would); `{$text: ...}` answers in plain text; anything
    else is the final answer (for a single output the bare value is enough).
    """
    from langchain_core.messages import AIMessage  # LangChain: only when an agent talks to the mock

    if isinstance(reply, dict) and ("$tool_calls" in reply or "$text" in reply):
        calls: list[dict[str, Any]] = []
        invalid: list[dict[str, Any]] = []
        for position, call in enumerate(reply.get("$tool_calls") or []):
            name = str(call.get("name", "")) if isinstance(call, dict) else str(call)
            args = call.get("args", {}) if isinstance(call, dict) else {}
            given = call.get("id") if isinstance(call, dict) else None
            ident = given if isinstance(given, str) and given else f"mock_{request.turn}_{position}"
            if isinstance(args, dict):
                calls.append({"name": name, "args": args, "id": ident, "type": "tool_call"})
            else:
                invalid.append(
                    {
                        "name": name,
                        "args": str(args),
                        "id": ident,
                        "type": "invalid_tool_call",
                        "error": "the arguments are not a JSON object",
                    }
                )
        return AIMessage(
            content=str(reply.get("$text") or ""), tool_calls=calls, invalid_tool_calls=invalid
        )
    value = reply
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            value = parsed
    properties = request.answer_schema.get("properties") or {}
    if not isinstance(value, dict) and len(properties) == 1:
        value = {next(iter(properties)): value}
    if isinstance(value, dict):
        call = {
            "name": request.answer_tool,
            "args": value,
            "id": f"mock_{request.turn}_answer",
            "type": "tool_call",
        }
        return AIMessage(content="", tool_calls=[call])
    return AIMessage(content=str(value))
