"""`blockyard diff --server URL`: the in-flight listing read from a real `blockyard serve` on 127.0.0.1 (a paused
run, a served schedule, a thread) is the report `--state` makes from the state database; the token as the
server's auth expects it; a server down, a 401, a bad URL or something that is not the API: exit 2, one line."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.serve.server import Settings
from tests.review.test_diff_inflight import CHAT, GATED
from tests.review.yardgit import BASE, repo, write
from tests.serve.serve_helpers import Live, free_socket, start_live
from tests.support.cli import Cli, Outcome, in_process

TOKEN = "s3cret-token"
NO_GATE = GATED.replace(
    '  - id: confirm\n    approval: {message: "Send it?", timeout: 1h, on_timeout: reject}\n', ""
)

Serve = Callable[..., Live]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return in_process(capsys)


@pytest.fixture
def serve() -> Iterator[Serve]:
    started: list[Live] = []

    def start(root: Path, token: str | None = None) -> Live:
        # no hot reload: the server keeps serving what it loaded while the test edits the work tree
        live = start_live(
            Settings(root=root, token=token, watch=False, schedules=False, grace=5.0, poll=0.1)
        )
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()


def served_yard(tmp_path: Path, serve: Serve, token: str | None = None) -> tuple[Path, Live, str]:
    """A yard in git, served, with a run paused at `confirm` and a thread of `chat`; then the work tree
    drops the gate and moves chat's schedule."""
    root = repo(
        tmp_path / "yard",
        {**BASE, "flows/hello.yaml": GATED, "flows/chat.yaml": CHAT, ".gitignore": ".blockyard/\n"},
    )
    live = serve(root, token)
    with live.client(token) as client:
        paused = client.post("/flows/hello/runs", json={"inputs": {"name": "Ada"}}).json()
        assert paused["status"] == "waiting", paused
        assert client.post("/threads", json={"id": "t1", "flow": "chat"}).status_code == 201
    write(
        root,
        {"flows/hello.yaml": NO_GATE, "flows/chat.yaml": CHAT.replace("0 9 * * *", "30 9 * * *")},
    )
    return root, live, str(paused["run_id"])


def one_line_error(outcome: Outcome) -> str:
    assert outcome.code == 2, (outcome.out, outcome.err)
    assert outcome.out == ""
    (line,) = outcome.err.strip().splitlines()
    assert line.startswith("error: ") and "Traceback" not in outcome.err
    return line


def test_the_server_listing_is_the_state_report(tmp_path: Path, cli: Cli, serve: Serve) -> None:
    root, live, run_id = served_yard(tmp_path, serve)
    outcome = cli(root, "diff", "HEAD", "--state", "--server", live.url, "--format", "json")
    assert outcome.code == 1, outcome.err
    remote: dict[str, Any] = json.loads(outcome.out)["in_flight"]
    assert remote["source"] == live.url
    (run,) = remote["paused_runs"]
    assert (run["run"], run["flow"], run["step"], run["impact"]) == (
        run_id,
        "hello",
        "confirm",
        "removed",
    )
    assert "keeps running on its pinned version (v1)" in run["detail"]
    (schedule,) = remote["schedules"]
    assert schedule["flow"] == "chat" and schedule["next_fire"]["head"].endswith("T09:30:00Z")
    assert schedule["next_fire"]["base"].endswith("T09:00:00Z")  # the server's own next fire time
    assert [(t["thread"], t["flow"]) for t in remote["threads"]] == [("t1", "chat")]
    # the same report as from the state database the server writes
    local = json.loads(cli(root, "diff", "HEAD", "--state", "--format", "json").out)["in_flight"]
    assert {**local, "source": live.url} == remote
    text = cli(root, "diff", "HEAD", "--server", live.url)  # --server implies --state
    assert f"in flight ({live.url}):" in text.out
    assert f"run {run_id} (hello, paused at confirm): step 'confirm' is removed" in text.out


def test_an_altered_gate_compares_with_the_pinned_definition(
    tmp_path: Path, cli: Cli, serve: Serve
) -> None:
    root, live, run_id = served_yard(tmp_path, serve)
    write(root, {"flows/hello.yaml": GATED.replace("Send it?", "Really send it?")})
    outcome = cli(root, "diff", "HEAD", "--server", live.url, "--format", "json")
    (run,) = json.loads(outcome.out)["in_flight"]["paused_runs"]
    assert (run["run"], run["impact"]) == (run_id, "altered") and "Really send it?" in run["detail"]
    # the pinned flow document, from GET /runs/{id}
    with live.client() as client:
        assert client.get(f"/runs/{run_id}").json()["definition"]["steps"][-2]["id"] == "confirm"


def test_the_token(tmp_path: Path, cli: Cli, serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    root, live, run_id = served_yard(tmp_path, serve, TOKEN)
    monkeypatch.delenv("BLOCKYARD_TOKEN", raising=False)
    refused = one_line_error(cli(root, "diff", "HEAD", "--server", live.url))
    assert refused == (
        f"error: the server at {live.url} refused the request (401): it needs a token; pass --token "
        "or set BLOCKYARD_TOKEN"
    )
    assert TOKEN not in one_line_error(
        cli(root, "diff", "HEAD", "--server", live.url, "--token", "wrong")
    )
    given = cli(root, "diff", "HEAD", "--server", live.url, "--token", TOKEN, "--format", "json")
    assert given.code == 1 and json.loads(given.out)["in_flight"]["paused_runs"][0]["run"] == run_id
    monkeypatch.setenv("BLOCKYARD_TOKEN", TOKEN)
    assert cli(root, "diff", "HEAD", "--server", live.url).code == 1
    assert TOKEN not in given.err


def test_errors_exit_2_with_one_line(tmp_path: Path, cli: Cli, serve: Serve) -> None:
    root = repo(tmp_path / "yard")
    write(root, {"flows/hello.yaml": NO_GATE})
    closed = free_socket()
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    down = one_line_error(cli(root, "diff", "HEAD", "--server", f"http://127.0.0.1:{port}"))
    assert down.startswith(f"error: cannot reach the server at http://127.0.0.1:{port}: ")
    for url in ("ftp://127.0.0.1/", "127.0.0.1:8000", "http://", "http://127.0.0.1:99999"):
        bad = one_line_error(cli(root, "diff", "HEAD", "--server", url))
        assert bad == f"error: --server needs an http:// or https:// URL with a host, got '{url}'"
    assert (
        one_line_error(cli(root, "diff", "HEAD", "--token", "x"))
        == "error: --token goes with --server URL"
    )
    live = serve(root)
    wrong_path = one_line_error(cli(root, "diff", "HEAD", "--server", live.url + "/api"))
    assert wrong_path.startswith(
        f"error: the server at {live.url}/api answered GET /flows with 404: "
    )
    with page_server() as other:  # a web server that is not Blockyard's
        assert one_line_error(cli(root, "diff", "HEAD", "--server", other)) == (
            f"error: {other} does not look like a Blockyard server: GET /flows gave not a JSON object"
        )


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class page_server:
    """A plain HTTP server on 127.0.0.1 answering every GET with an HTML page."""

    def __enter__(self) -> str:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
