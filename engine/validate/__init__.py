"""Schema and semantic checks -> Diagnostics. Imports nothing from LangGraph or LangChain."""
