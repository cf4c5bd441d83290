"""Running flows: the `Engine` (`engine.py`) runs pinned definitions durably on the state database
(engine/state/); `Yard` (`yard.py`) is the Python API in front of it. See docs/runtime.md and
docs/architecture.md."""
