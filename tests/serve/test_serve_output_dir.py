"""POST /flows/{name}/runs with `output_dir`: the run's files land in that folder of the yard; a
folder outside the yard is a 4xx problem and no run starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.serve.serve_helpers import Live
from tests.support.coder_yard import CODER_YARD


def test_the_body_names_the_output_folder(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(CODER_YARD)
    live = serve(root)
    with live.client() as client:
        done = client.post("/flows/code/runs", json={"output_dir": "served"})
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "finished"
        events = client.get(
            f"/runs/{done.json()['run_id']}/events", headers={"Accept": "application/json"}
        ).json()
        bad = client.post("/flows/code/runs", json={"output_dir": "../elsewhere"})
        runs = client.get("/runs").json()
    assert (root / "served" / "app.py").read_text() == "print('hi')\n"
    assert not (root / "output").exists()  # the body wins over the flow's output_dir
    # the agent's two calls of one turn run in parallel: either may be written first
    assert sorted(
        (e["data"]["path"], e["data"]["bytes"])
        for e in events["events"]
        if e["type"] == "file_written"
    ) == [("app.py", 12), ("lib/util.py", 6)]
    assert 400 <= bad.status_code < 500
    assert "output_dir '../elsewhere': it contains '..'" in bad.text
    listed = runs["runs"] if isinstance(runs, dict) else runs
    assert len(listed) == 1


def test_odd_output_folders_are_4xx_problems(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(CODER_YARD)
    live = serve(root)
    odd = {
        '"/etc"': "output_dir '/etc': it is absolute",
        '"a\\u0000b"': "output_dir 'a\\x00b': it holds a NUL character",
        '"bad\\udcff"': "output_dir: the text holds a lone UTF-16 surrogate",
        f'"{"x" * 5000}"': "cannot be a folder of the yard: File name too long",
        '"escape/../.."': "output_dir 'escape/../..': it contains '..'",
        '".git/hooks"': "output_dir '.git/hooks': it lies inside .git, the repository; a run writes only where",
        '"flows"': "output_dir 'flows': it is flows, the flow folder; a run writes only where",
        '""': "output_dir '': it is empty",
        "7": "output_dir: Input should be a valid string",
    }
    with live.client() as client:
        for value, message in odd.items():
            answer = client.post(
                "/flows/code/runs",
                content='{"output_dir": ' + value + "}",
                headers={"Content-Type": "application/json"},
            )
            assert answer.status_code == 422, (value, answer.text)
            assert message in answer.json()["error"]["message"], (value, answer.text)
        assert client.get("/runs").json()["runs"] == []
    assert not (root / "output").exists()
