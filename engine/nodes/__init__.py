"""What compiled graph nodes run with, shared by the compiler, the executors, agents and smart
blocks: the run's `RunContext` (`context.py`), step events (`events.py`), failures (`errors.py`),
template scopes and output checks (`scope.py`), retry and timeout policies (`policies.py`) and
the `BlockCall` an `Executor` gets (`call.py`). See docs/architecture.md."""
