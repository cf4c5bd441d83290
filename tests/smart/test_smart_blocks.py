"""Smart blocks run offline on DSPy's own DummyLM (the mock provider), and against the OpenAI stub
and the Gemini stub through LiteLLM: modes, typed outputs, guardrails, compiled programs, and the
missing extra."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.compile import compile_flow
from engine.core.errors import UsageError
from engine.definitions.pinned import make_bundle
from engine.definitions.project import load_project
from engine.nodes.errors import CompileError
from tests.agents.agent_kit import KEY_ENV, PLANTED_KEY, run_flow, stub_config
from tests.support.gemini_stub import GeminiReply, GeminiStub
from tests.support.openai_stub import OpenAIStub, Reply

Yard = Callable[[dict[str, str]], Path]

TLDR = """
    block: tldr
    kind: smart
    description: Summarize a text in one line.
    inputs: {text: {type: string, description: The text.}}
    outputs:
      summary: {type: string, description: One line.}
      words: {type: integer}
      tone: {type: string, enum: [calm, alarmed]}
    mode: {mode}
    {extra}
"""
FLOW = """
    flow: sum
    inputs: {text: {type: string}}
    outputs: [summary, words, tone]
    steps:
      - {id: s, uses: tldr}
"""


def smart_yard(
    make_yard: Yard,
    mode: str = "predict",
    extra: str = "",
    replies: str = "{}",
    config: str | None = None,
) -> Path:
    settings = (
        config
        if config is not None
        else f"models:\n  default:\n    provider: mock\n    replies: {replies}\n"
    )
    block = TLDR.replace("{mode}", mode).replace("{extra}", extra)
    return make_yard(
        {"blockyard.yaml": settings, "blocks/tldr.yaml": block, "flows/sum.yaml": FLOW}
    )


@pytest.mark.parametrize("mode", ["predict", "chain_of_thought"])
def test_unscripted_predictions_are_typed_outputs(make_yard: Yard, mode: str) -> None:
    done = run_flow(smart_yard(make_yard, mode), "sum", {"text": "Markets fell."})

    assert done.outputs is not None, done.error
    assert isinstance(done.outputs["summary"], str) and isinstance(done.outputs["words"], int)
    assert done.outputs["tone"] in ("calm", "alarmed")
    assert done.of("step_started", "s")[0].data["kind"] == "smart"


def test_scripted_predictions_in_chain_of_thought(make_yard: Yard) -> None:
    replies = (
        "{s: [{reasoning: It is about money., summary: Stocks dropped., words: 2, tone: alarmed}]}"
    )
    done = run_flow(
        smart_yard(make_yard, "chain_of_thought", replies=replies),
        "sum",
        {"text": "Stocks fell 3%."},
    )

    assert done.outputs == {"summary": "Stocks dropped.", "words": 2, "tone": "alarmed"}


def test_guardrails_predict_again_until_one_passes(make_yard: Yard) -> None:
    replies = (
        "{s: [{summary: far far too long for the rail, words: 7, tone: calm},"
        " {summary: 'short', words: many, tone: calm}, {summary: Short., words: 1, tone: calm}]}"
    )
    done = run_flow(
        smart_yard(make_yard, extra="guardrails: {max_length: 20, attempts: 3}", replies=replies),
        "sum",
        {"text": "x"},
    )

    assert done.outputs == {"summary": "Short.", "words": 1, "tone": "calm"}, done.error


def test_a_guardrail_that_never_passes_fails_the_step(make_yard: Yard) -> None:
    replies = "{s: [{summary: far far too long for the rail, words: 7, tone: calm}]}"
    done = run_flow(
        smart_yard(make_yard, extra="guardrails: {max_length: 20, attempts: 2}", replies=replies),
        "sum",
        {"text": "x"},
    )

    assert done.error == (
        "guardrail max_length: output 'summary' has 29 characters, more than 20 (after 2 attempts)"
    )
    assert done.last.step == "s"


def test_without_guardrails_a_bad_prediction_fails_like_any_output(make_yard: Yard) -> None:
    done = run_flow(
        smart_yard(make_yard, replies="{s: [{summary: ok, words: 1, tone: furious}]}"),
        "sum",
        {"text": "x"},
    )

    assert done.error is not None and "tone" in done.error


def test_against_an_openai_compatible_server(make_yard: Yard, stub: OpenAIStub) -> None:
    stub.queue(
        Reply.text(
            "[[ ## summary ## ]]\nShares slid.\n\n[[ ## words ## ]]\n2\n\n[[ ## tone ## ]]\ncalm\n\n"
            "[[ ## completed ## ]]"
        )
    )
    root = smart_yard(make_yard, config=stub_config(stub))
    done = run_flow(root, "sum", {"text": "Shares slid on Monday."})

    assert done.outputs == {"summary": "Shares slid.", "words": 2, "tone": "calm"}, done.error
    (request,) = stub.requests
    assert request.headers["authorization"] == f"Bearer {PLANTED_KEY}"
    assert "Shares slid on Monday." in request.messages[-1]["content"]
    assert "Summarize a text in one line." in request.messages[0]["content"]
    stored = "".join(
        p.read_bytes().decode("latin-1") for p in (root / ".blockyard").rglob("*") if p.is_file()
    )
    assert PLANTED_KEY not in stored + "".join(e.to_json() for e in done.events)


def test_against_the_gemini_api_with_a_google_profile(make_yard: Yard) -> None:
    with GeminiStub() as gemini:
        gemini.queue(
            GeminiReply.of_text(
                "[[ ## summary ## ]]\nShares slid.\n\n[[ ## words ## ]]\n2\n\n"
                "[[ ## tone ## ]]\ncalm\n\n[[ ## completed ## ]]"
            )
        )
        config = (
            f"models:\n  default:\n    provider: google\n    name: gemini-2.5-flash\n"
            f"    base_url: {gemini.base_url}\n    api_key_env: {KEY_ENV}\n"
        )
        done = run_flow(
            smart_yard(make_yard, config=config), "sum", {"text": "Shares slid on Monday."}
        )

        assert done.outputs == {"summary": "Shares slid.", "words": 2, "tone": "calm"}, done.error
        (request,) = gemini.requests
        # LiteLLM's gemini/ route
        assert request.path == "/v1beta/models/gemini-2.5-flash:generateContent"
        assert request.headers["x-goog-api-key"] == PLANTED_KEY
        assert "Shares slid on Monday." in str(request.contents)


def test_a_missing_key_is_named(make_yard: Yard, stub: OpenAIStub) -> None:
    done = run_flow(smart_yard(make_yard, config=stub_config(stub)), "sum", {"text": "x"}, env={})

    assert done.error == (
        f"model profile 'default' (openai, model 'stub-model') needs an API key: set the "
        f"environment variable {KEY_ENV}"
    )


def test_without_the_extra_a_smart_block_does_not_compile(
    make_yard: Yard, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.executors.smart as smart

    monkeypatch.setattr(smart, "dspy_installed", lambda: False)
    root = smart_yard(make_yard)
    with pytest.raises(CompileError, match="the dspy extra is not installed") as caught:
        compile_flow(make_bundle(load_project(root), "sum"))
    assert str(caught.value) == (
        "flow 'sum', step 's': block 'tldr' is a smart block, which needs DSPy, and the "
        "dspy extra is not installed: pip install 'dspy>=2.6'"
    )


def test_validate_never_imports_dspy(make_yard: Yard) -> None:
    import subprocess

    root = smart_yard(make_yard)
    probe = (
        "import sys; from engine.cli import main; code = main(['validate', '--root', sys.argv[1]]); "
        "print(code, 'dspy' in sys.modules, 'litellm' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split()[-3:] == ["0", "False", "False"], done.stderr


def test_dspy_is_imported_at_the_first_prediction_not_at_compile(make_yard: Yard) -> None:
    """A flow whose smart step never runs, or a server that only compiles it, does not pay DSPy's import
    (~1 s of CPU); a block with a compiled program does, at compile, which checks that the program fits."""
    import subprocess

    root = smart_yard(make_yard)
    probe = (
        "import sys\nfrom pathlib import Path\n"
        "from engine.compile import compile_flow\nfrom engine.definitions.pinned import make_bundle\n"
        "from engine.definitions.project import load_project\nfrom engine import Yard\n"
        "compile_flow(make_bundle(load_project(Path(sys.argv[1])), 'sum'))\n"
        "print('compiled', 'dspy' in sys.modules)\n"
        "done = Yard.load(sys.argv[1]).run('sum', {'text': 'Markets fell.'})\n"
        "print('ran', 'dspy' in sys.modules, sorted(done.outputs))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.splitlines()[-2:] == [
        "compiled False",
        "ran True ['summary', 'tone', 'words']",
    ], done.stdout + done.stderr


def test_a_compiled_program_linking_out_of_the_yard_is_not_pinned(
    make_yard: Yard, tmp_path: Path
) -> None:
    root = smart_yard(make_yard)
    outside = tmp_path / "stolen.json"
    outside.write_text('{"secret": "ghp_SECRETTOKEN42"}\n', encoding="utf-8")
    (root / "blocks" / "tldr.dspy.json").symlink_to(outside)
    with pytest.raises(UsageError, match="resolves outside the yard; it is not read") as caught:
        make_bundle(load_project(root), "sum")
    assert str(caught.value) == (
        "block 'tldr': symbolic link blocks/tldr.dspy.json resolves outside the yard; "
        "it is not read"
    )
