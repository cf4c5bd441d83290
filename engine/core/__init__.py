"""What every layer shares: errors and how they are shown, diagnostics (a problem at a place),
events, the value domain, model-call usage, secret masking, the version, optional extras and the
collector's pause for bulk work. Imports nothing else of the engine (docs/architecture.md)."""
