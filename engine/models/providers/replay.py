"""The offline mock's replies through LangChain's callbacks, as a real chat model's are.

A real provider is a LangChain chat model, called inside the LangGraph node of the step: LangChain
hands its run the node's callbacks, so LangGraph's `messages` stream mode (`messages-tuple` on the
LangGraph server), LangSmith's tracing and any handler a caller adds see its tokens
(`on_llm_new_token`). The mock makes its reply itself; inside a LangChain run that has callbacks
(`in_langchain_run`, engine/models/providers/mock.py) its reply is played, piece by piece, through
`ReplayChat`, a chat model that streams given chunks, so those handlers see it too. Outside one
(Blockyard's own runs without tracing) nothing is played and LangChain is not loaded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult


class ReplayChat(BaseChatModel):
    """A chat model whose reply is `chunks`, streamed in that order (whatever it is sent)."""

    chunks: list[AIMessageChunk]
    model: str = "mock"

    @property
    def _llm_type(self) -> str:
        return "blockyard-mock"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "mock"
        params["ls_model_name"] = self.model
        return params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        whole = AIMessageChunk(content="")
        for chunk in self.chunks:
            whole = whole + chunk
        return ChatResult(generations=[ChatGeneration(message=whole)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # (LangChain's `stream` hands each chunk to the callbacks: `on_llm_new_token`)
        for chunk in self.chunks:
            yield ChatGenerationChunk(message=chunk.model_copy())

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self.chunks:
            yield ChatGenerationChunk(message=chunk.model_copy())


def reply_chunks(
    words: Sequence[str], calls: Sequence[tuple[str, Any]] = ()
) -> list[AIMessageChunk]:
    """The chunks of a reply: its text word by word, then each tool call (name, arguments) whole, as
    a provider streams the call of the function that holds a block's outputs."""
    chunks = [AIMessageChunk(content=word) for word in words]
    for index, (name, args) in enumerate(calls):
        text = json.dumps(args, ensure_ascii=False, default=str)
        chunks.append(
            AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {
                        "name": name,
                        "args": text,
                        "id": f"mock_call_{index}",
                        "index": index,
                        "type": "tool_call_chunk",
                    }
                ],
            )
        )
    return chunks or [AIMessageChunk(content="")]


async def replay(chat: list[Any], chunks: list[AIMessageChunk], model: str) -> None:
    """Play a reply through LangChain: the current run's callbacks see a chat model run stream it."""
    async for _ in ReplayChat(chunks=chunks, model=model).astream(chat):
        pass
