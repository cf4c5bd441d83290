"""Jinja2 templates and bare expressions, sandboxed, strict and bounded: `render` (what the validator
and the runtime call), `sandbox` (the environment), `limits` and `checks` (what one template may
make, measured before it is made), `fast` (simple expressions compiled to closures).
docs/architecture.md."""
