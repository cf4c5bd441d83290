"""HTTP routes of `blockyard serve` (DESIGN.md §6), one module per resource."""
