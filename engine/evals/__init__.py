"""`blockyard eval`: evals of the yard's flows and blocks (docs/evals.md).

The eval files and their datasets are read and checked by engine/validate (evalfiles.py, evalchecks.py:
`blockyard validate` reports their problems too); this package runs them. `targets.py` pins what each
eval runs on each side (the working tree, and with `--base` the base revision); `runner.py` runs the
cases concurrently on one engine with a throw-away state database, `assertions.py` and `judge.py` check
each case, `cache.py` keeps model replies by what was asked; `results.py` holds what came out,
`compare.py` base against head, `history.py` the results kept in the yard's state database per flow
version, `report.py` (the terminal table), `markdown.py`, `junit.py` and `progress.py` show them, and
`command.py` puts them together.
"""
