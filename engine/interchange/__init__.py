"""Other ways to describe a flow, converted to (and from) flow files: React Flow graphs
(docs/reactflow.md) and TaskPlans (docs/taskplans.md). They land on the same validator, compiler
and pinned runs as YAML flows. Nothing here imports LangGraph: converting is as light as validating.
"""
