from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.cli import main
from tests.support.coder_yard import CODER_YARD

BLOCK = """
block: double
kind: transform
inputs: {n: {type: integer}}
outputs: {twice: {type: integer}}
compute: {twice: "n * 2"}
"""
FLOW = """
flow: twice
inputs: {n: {type: integer}}
outputs: [twice]
steps:
  - {id: double, uses: double, with: {n: "{{ inputs.n }}"}}
"""


def run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main(["test", *args, "--root", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_passing_and_failing_tests_are_reported_with_a_summary(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/twice.yaml": FLOW,
            "flows/twice.test.yaml": """
        flow: twice
        tests:
          - name: doubles
            inputs: {n: 21}
            expect: {outputs: {twice: 42}}
          - name: wrong expectation
            inputs: {n: 2}
            expect: {outputs: {twice: 5, thrice: 6}}
          - name: bad input fails
            inputs: {n: two}
            expect: {status: failed}
        """,
        }
    )
    code, out, _ = run(capsys, root)
    assert code == 1
    assert out.splitlines() == [
        "PASS flows/twice.test.yaml: doubles",
        "FAIL flows/twice.test.yaml: wrong expectation",
        "     output 'twice' is 4, expected 5",
        "     output 'thrice' missing (outputs: twice)",
        "FAIL flows/twice.test.yaml: bad input fails",
        "     error: flow 'twice': input 'n' must be an integer, got string 'two'",
        "1 passed, 2 failed",
    ]
    assert not (root / ".blockyard" / "state.db").exists()  # tests run in a scratch database


def test_a_malformed_test_file_names_its_line(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/twice.yaml": FLOW,
            "flows/twice.test.yaml": """
        flow: twice
        tests:
          - name: typo
            inptus: {n: 1}
        """,
        }
    )
    code, _, err = run(capsys, root)
    assert code == 1
    assert (
        "flows/twice.test.yaml:4:5: error BY700 tests.0.inptus: Extra inputs are not permitted"
        in err
    )


CHAT = """
flow: chat
inputs: {message: {type: string}}
outputs: [reply]
steps:
  - {id: answer, uses: answer, with: {message: "{{ inputs.message }}"}}
"""
ANSWER = """
block: answer
kind: llm
inputs: {message: {type: string}}
outputs: {reply: {type: string}}
prompt: {user: "{{ message }}"}
"""


def test_a_test_with_turns_holds_one_conversation(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            "blocks/answer.yaml": ANSWER,
            "flows/chat.yaml": CHAT,
            "flows/chat.test.yaml": """
        flow: chat
        tests:
          - name: remembers
            replies:
              answer:
                - {when: {contains: "Grace"}, reply: {reply: "You are Grace."}}
                - {reply: "Who are you?"}
            turns:
              - inputs: {message: "I am Grace"}
                expect: {outputs: {reply: "You are Grace."}}
              - inputs: {message: "Who am I?"}
                expect: {outputs: {reply: "You are Grace."}}
          - name: a turn that differs fails the test, named
            replies: {answer: [{when: {contains: "Grace"}, reply: {reply: "You are Grace."}}, {reply: "Who?"}]}
            turns:
              - inputs: {message: "Hello"}
              - inputs: {message: "Who am I?"}
                expect: {outputs: {reply: "You are Grace."}}
              - inputs: {message: "never taken"}
        """,
        }
    )
    code, out, _ = run(capsys, root)
    assert code == 1
    assert out.splitlines() == [
        "PASS flows/chat.test.yaml: remembers",
        "FAIL flows/chat.test.yaml: a turn that differs fails the test, named",
        "     turn 2: output 'reply' is 'Who?', expected 'You are Grace.'",
        "1 passed, 1 failed",
    ]


def test_turns_and_a_single_run_do_not_mix(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            "blocks/answer.yaml": ANSWER,
            "flows/chat.yaml": CHAT,
            "flows/chat.test.yaml": """
        flow: chat
        tests:
          - name: both
            inputs: {message: hi}
            turns: [{inputs: {message: hi}}]
        """,
        }
    )
    code, _, err = run(capsys, root)
    assert code == 1
    assert (
        "flows/chat.test.yaml:3:5: error BY700 tests.0: Value error, a test with `turns` gives each turn its "
        "own inputs, decisions and expect" in err
    )


def test_no_tests_is_a_failure(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard({"blocks/double.yaml": BLOCK, "flows/twice.yaml": FLOW})
    code, _, err = run(capsys, root)
    assert (code, err) == (1, "no flow tests found (flows/*.test.yaml)\n")


def test_the_example_yard_tests_pass(repo_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, repo_root)
    assert code == 0, out
    assert out.splitlines()[-1] == "11 passed, 0 failed"
    assert "PASS flows/support_chat.test.yaml: turn 3 is answered from the conversation" in out
    assert "PASS flows/swe_team.test.yaml: never passes" in out


SECRET_TEST = """\
flow: twice
tests:
  - name: ghp_SECRETTOKEN42
    inputs: {n: 1}
    expect: {outputs: {twice: 2}}
"""


def test_a_test_file_linking_out_of_the_yard_is_refused_unread(
    make_yard: Callable[[dict[str, str]], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard({"blocks/double.yaml": BLOCK, "flows/twice.yaml": FLOW})
    outside = tmp_path / "outside.test.yaml"
    outside.write_text(SECRET_TEST, encoding="utf-8")
    (root / "flows" / "evil.test.yaml").symlink_to(outside)
    expected = (
        "flows/evil.test.yaml:1:1: error BY008 symbolic link flows/evil.test.yaml resolves outside the "
        "yard; it is not read\n"
    )
    for args in ((), (str(root / "flows" / "evil.test.yaml"),), (str(root / "flows"),)):
        code, out, err = run(capsys, root, *args)
        assert (code, out) == (1, ""), args
        assert err.endswith(expected) and "SECRET" not in err and str(outside) not in err, args


def test_a_test_file_named_outside_the_yard_is_the_users_choice(
    make_yard: Callable[[dict[str, str]], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard({"blocks/double.yaml": BLOCK, "flows/twice.yaml": FLOW})
    elsewhere = tmp_path / "elsewhere" / "mine.test.yaml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(SECRET_TEST.replace("ghp_SECRETTOKEN42", "doubles"), encoding="utf-8")
    code, out, _ = run(capsys, root, str(elsewhere))
    assert code == 0 and "PASS" in out and "doubles" in out


LOOP_FLOW = """
flow: spin
inputs: {n: {type: integer}}
outputs:
  twice: {}
  never: {optional: true}
steps:
  - id: again
    loop:
      max_iterations: 2
      until: context.twice > 100
      on_exhausted: continue
      steps:
        - {id: double, uses: double, with: {n: "{{ inputs.n }}"}}
  - id: big
    router: {routes: [{expr: "context.twice > 100", goto: late}], default: end}
  - {id: late, uses: double, with: {n: 1}, outputs: {twice: never}}
"""


def test_warnings_and_absent_outputs_are_expected(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            "blocks/double.yaml": BLOCK,
            "flows/spin.yaml": LOOP_FLOW,
            "flows/spin.test.yaml": """
        flow: spin
        tests:
          - name: runs out of passes
            inputs: {n: 1}
            expect: {outputs: {twice: 2}, absent: [never], warnings: ["loop 'again' ran 2 iterations"]}
          - name: wrong expectations
            inputs: {n: 1}
            expect: {absent: [twice], warnings: [ran 3 iterations]}
        """,
        }
    )
    code, out, _ = run(capsys, root)
    assert code == 1
    assert out.splitlines() == [
        "PASS flows/spin.test.yaml: runs out of passes",
        "FAIL flows/spin.test.yaml: wrong expectations",
        "     output 'twice' is 2, expected none",
        "     no warning contains 'ran 3 iterations' (warnings: loop 'again' ran 2 iterations (max_iterations) and "
        "`until: context.twice > 100` is still false; going on)",
        "1 passed, 1 failed",
    ]


def test_files_are_expected_and_written_to_a_scratch_folder_not_the_yard(
    make_yard: Callable[[dict[str, str]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_yard(
        {
            **CODER_YARD,
            "flows/code.test.yaml": """
        flow: code
        tests:
          - name: writes both files
            expect: {files: {app.py: "print('hi')", lib/util.py: X = 1}}
          - name: wrong expectations
            expect: {files: {app.py: "print('bye')", missing.txt: anything}}
        """,
        }
    )
    code, out, _ = run(capsys, root)
    assert code == 1
    assert out.splitlines() == [
        "PASS flows/code.test.yaml: writes both files",
        "FAIL flows/code.test.yaml: wrong expectations",
        "     file 'app.py' does not contain \"print('bye')\"",
        "     file 'missing.txt' was not written (written: app.py, lib/util.py)",
        "1 passed, 1 failed",
    ]
    assert not (root / "output").exists()  # the flow's output_dir: not for tests
