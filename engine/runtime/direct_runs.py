"""Which executions of a run go without LangGraph's loop (engine/compile/direct.py).

- A run without checkpoints (`none`) of a graph whose every node runs inline.
- A `sync` or `async` run, outside a conversation thread, of such a graph none of whose steps can
  write `messages` (no agent block): its entry node then runs every step, and what each step finished
  is committed as its row (engine/state/journal.py) before the next begins (`sync`) or while it runs
  (`async`). Those rows are all a resume needs: it starts the run over from its inputs, and the node
  goes on after the last step it kept, as it does when LangGraph runs it again. LangGraph's checkpoints
  would add only their cost, so such a run keeps none (docs/runtime.md, "What a finished run keeps").

LangGraph's loop stays for `exit` (its one checkpoint, written as a failed run stops, is where it
resumes from), for a conversation's turn (the thread's checkpoints hold its conversation), and for
an execution that goes on from a checkpoint LangGraph kept.
"""

from __future__ import annotations

from engine.compile import CompiledFlow
from engine.compile.direct import Direct
from engine.spec.durability import NO_CHECKPOINTS

DURABLE = frozenset({"sync", "async"})


def plan_for(compiled: CompiledFlow, mode: str, thread_id: str | None) -> Direct | None:
    """The plan to run an execution of `compiled` in durability `mode` without LangGraph's loop
    (a turn of conversation `thread_id` never is), or None."""
    plan = compiled.direct
    if plan is None:
        return None
    if mode in NO_CHECKPOINTS:
        return plan
    return plan if plan.durable and mode in DURABLE and thread_id is None else None
