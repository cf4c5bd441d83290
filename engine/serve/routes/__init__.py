"""HTTP routes of `blockyard serve` (docs/serve.md, HTTP API), one module per resource."""
