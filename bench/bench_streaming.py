"""Token streaming: time to the first `token` event of an llm step, against plain langchain-openai.

Both variants talk to the same loopback OpenAI-compatible server (tests/support/openai_stub.py),
which waits 50 ms (the model "thinking"), then streams the structured answer as a call of the
block's function, 7 characters per chunk, 5 ms apart.

  langchain   ChatOpenAI.bind_tools([the function], tool_choice=...).astream(messages): time from
              the call to the first chunk whose arguments hold text of the answer field (decoded)
  blockyard   Yard.astream("ask", ...): time from the call to the first `token` event of the llm
              step — a whole durable run: run row, checkpoint, step_started, then the model call

The difference is what a run adds before the first token reaches a client (the bound is 20 ms).

    python bench/bench_streaming.py        # BENCH_ROUNDS=15 by default
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _harness import header, make_yard, measure, median, rounds, table

from engine import Yard
from engine.models.streaming import FieldText

ANSWER = "Streaming keeps a chat interface alive: the first words show while the rest is written."
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def main() -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI
    from support.openai_stub import OpenAIStub, Reply

    count = rounds(15)
    with OpenAIStub() as stub:
        stub.default = Reply(structured={"answer": ANSWER}, delay=0.05, chunk_delay=0.005)
        root = make_yard(
            {
                "blockyard.yaml": f"models:\n  default: {{provider: openai, name: m, base_url: '{stub.base_url}'}}\n",
                "blocks/answer.yaml": """
                block: answer
                kind: llm
                inputs: {question: {type: string}}
                outputs: {answer: {type: string}}
                prompt: {user: "{{ question }}"}
            """,
                "flows/ask.yaml": "flow: ask\ninputs: {question: {type: string}}\noutputs: [answer]\n"
                "steps:\n  - {id: reply, uses: answer}\n",
            }
        )
        yard = Yard.load(root, state=root / "state.db", env={})
        tool = {
            "type": "function",
            "function": {
                "name": "answer",
                "description": "Return the outputs.",
                "parameters": SCHEMA,
            },
        }
        chat = ChatOpenAI(
            model="m",
            base_url=stub.base_url,
            api_key="not-needed",
            max_retries=0,
            use_responses_api=False,
        ).bind_tools([tool], tool_choice="required")

        async def plain() -> float:
            began = time.perf_counter()
            first: float | None = None
            decoder = FieldText("answer")  # the answer's text inside the streamed arguments
            async for chunk in chat.astream([HumanMessage("Why stream?")]):
                text = "".join(
                    decoder.feed(piece.get("args") or "") for piece in chunk.tool_call_chunks
                )
                if first is None and text:
                    first = time.perf_counter() - began
            assert first is not None
            return first

        async def engine() -> float:
            began = time.perf_counter()
            first: float | None = None
            async for event in yard.astream("ask", {"question": "Why stream?"}):
                if first is None and event.type == "token":
                    first = time.perf_counter() - began
            assert first is not None
            return first

        header(
            "time to the first token of an llm step (loopback OpenAI-compatible server, streamed)"
        )
        samples = await measure({"langchain": plain, "blockyard": engine}, count, warmup=2)
        rows = [[name, f"{median(values) * 1000:.1f} ms"] for name, values in samples.items()]
        rows.append(
            [
                "difference",
                f"{(median(samples['blockyard']) - median(samples['langchain'])) * 1000:.1f} ms",
            ]
        )
        print(table(["variant", "median time to first token"], rows))
        yard.close()


if __name__ == "__main__":
    asyncio.run(main())
