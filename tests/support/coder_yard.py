"""A yard whose agent writes two files with `write_file` (scripted mock turns): for the tests of
output folders, over the CLI, the Python API and HTTP."""

from __future__ import annotations

CODER_YARD = {
    "blocks/coder.yaml": """
        block: coder
        kind: agent
        inputs: {path: {type: string}}
        outputs: {done: {type: boolean}}
        prompt: {user: "Write {{ path }}"}
        tools: [write_file]
        model: coding
    """,
    "flows/code.yaml": """
        flow: code
        output_dir: output
        outputs: [done]
        steps:
          - {id: write, uses: coder, with: {path: app.py}}
    """,
    "flows/gated_code.yaml": """
        flow: gated_code
        outputs: [done]
        steps:
          - {id: ok, approval: {message: "Write the code?"}}
          - {id: write, uses: coder, with: {path: app.py}}
    """,
    "blockyard.yaml": """
        models:
          coding:
            provider: mock
            replies:
              write:
                - $tool_calls:
                    - {name: write_file, args: {path: app.py, content: "print('hi')\\n"}}
                    - {name: write_file, args: {path: lib/util.py, content: "X = 1\\n"}}
                - {done: true}
    """,
}
