"""Reviewing a change of the yard (docs/review.md): `blockyard diff` between two revisions, the
version policy `validate --base` enforces, and what a change means for runs in flight.

`revisions.py` reads the two sides (git revisions through git itself, folders, the working tree),
`compare.py` diffs the loaded specs, `graphs.py` the graphs of changed flows, `versions.py` is
the version policy, `inflight.py` the impact on paused runs, schedules and threads, `render.py`
the text, JSON and Markdown forms. Imports no LangGraph: `diff` is as light as `validate`."""
