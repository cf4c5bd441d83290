"""The state database: one SQLite file per yard (`paths.state`, `.blockyard/state.db`), shared by
every process of the yard — connections (`database.py`), LangGraph's checkpointer on the
group-commit writer (`checkpointer.py`, `writer.py`), our tables (`store.py`: runs, their trace,
definitions; `gates.py`; `threads.py`), run ids, process liveness and the memory store.
See docs/runtime.md (The state database) and docs/architecture.md."""
