"""The LangGraph Server API, spoken by `blockyard serve` under a prefix (`server.langgraph_prefix`, default /lg),
so langgraph-sdk clients and the chat UIs built on them work unchanged: assistants are the served flows, threads
are conversation threads, runs are runs, approval gates are interrupts, the store is the yard's memory.

`mount.py` routes requests under the prefix to the sub-application of `app.py`; the route modules
(`assistants.py`, `threads.py`, `runs.py`, `crons.py`, `store.py`) answer them through the server's own parts, and the
mapping modules (`shapes.py`, `schemas.py`, `messages.py`, `interrupts.py`, `state.py`, `stream.py`) translate
between Blockyard's records and events and LangGraph's shapes. What is supported: docs/langgraph-api.md.
"""
