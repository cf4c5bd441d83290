"""A yard's definitions on disk: its files read without leaving it (`files`), YAML with positions
(`load`), JSON Schema checks (`schema`), the typed project (`project`), prompt files (`prompts`),
output folders (`outputdir`), what one flow is made of (`closure`) and its pinned bundle
(`pinned`). Imports no LangGraph (docs/architecture.md)."""
