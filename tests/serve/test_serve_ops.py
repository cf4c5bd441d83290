"""Operations: token enforcement, schedules firing in a live server, the CLI commands."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from engine.serve.clock import ManualClock
from engine.serve.logs import LOGGER
from engine.serve.schedules import HOUSEKEEPING
from tests.serve.serve_helpers import YARD, Live, free_socket, is_up, wait_for, wait_run
from tests.support import processes
from tests.support.cli import Cli
from tests.support.example import copy_example_yard
from tests.support.loopback import LOOPBACK

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_a_token_protects_the_api(yard: Path, serve: Callable[..., Live]) -> None:
    live = serve(yard, watch=False, schedules=False, token="s3cret")
    with live.client() as anonymous:
        for method, path in [
            ("GET", "/flows"),
            ("GET", "/runs"),
            ("GET", "/diagnostics"),
            ("POST", "/flows/add/runs"),
            ("POST", "/runs/x/resume"),
            ("GET", "/runs/x/events"),
        ]:
            response = anonymous.request(method, path, json={})
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error"]["code"] == "unauthorized"
        assert "needs a token" in anonymous.get("/flows").json()["error"]["message"]
        for public in ("/healthz", "/", "/static/app.js", "/docs", "/openapi.json"):
            assert anonymous.get(public).status_code == 200, public
    with live.client(token="wrong") as wrong:
        response = wrong.get("/flows")
        assert (
            response.status_code == 401
            and response.json()["error"]["message"] == "the token is wrong"
        )
    with live.client(token="s3cret") as client:
        assert client.get("/flows").status_code == 200
        result = client.post("/flows/add/runs", json={"inputs": {"a": 1}}).json()
        assert result["outputs"] == {"total": 3}


def test_a_schedule_fires_in_the_server_when_the_clock_says_so(
    make_yard: Callable[[dict[str, str]], Path], serve: Callable[..., Live]
) -> None:
    root = make_yard(
        {
            **YARD,
            "flows/add.yaml": YARD["flows/add.yaml"]
            + "schedule: {cron: '30 6 * * *', timezone: UTC, inputs: {a: 40}}\n",
        }
    )
    clock = ManualClock(datetime(2026, 5, 4, 6, 0, tzinfo=UTC))
    live = serve(root, watch=False, clock=clock)
    with live.client() as client:
        schedule = wait_for(
            lambda: (
                (f := client.get("/flows/add").json())["schedule"]["next_fire"] and f["schedule"]
            )
        )
        assert schedule == {
            "cron": "30 6 * * *",
            "timezone": "UTC",
            "misfire": "skip",
            "inputs": {"a": 40},
            "next_fire": "2026-05-04T06:30:00+00:00",
            "last_fire": None,
            "last_run": None,
        }
        assert client.get("/runs").json()["runs"] == []
        # the scheduler has seen the schedule begin (it sleeps until its next housekeeping): moved before
        # that, the clock would make 06:30 a time the schedule never saw, not one to fire at
        wait_for(lambda: clock.now() + HOUSEKEEPING in clock.sleeping())
        clock.set(datetime(2026, 5, 4, 6, 30, 1, tzinfo=UTC))
        runs = wait_for(lambda: client.get("/runs", params={"flow": "add"}).json()["runs"])
        run = wait_run(client, runs[0]["id"])
        assert (run["inputs"], run["outputs"]) == ({"a": 40, "b": 2}, {"total": 42})
        # the fire time is recorded before the run starts, its run's id once it has started
        # (engine/serve/schedules.py): on a busy machine this quick run can finish in between
        schedule = wait_for(
            lambda: (s := client.get("/flows/add").json()["schedule"])["last_run"] and s
        )
        assert schedule["last_fire"] == "2026-05-04T06:30:00+00:00"
        assert schedule["last_run"] == run["id"]
        assert schedule["next_fire"] == "2026-05-05T06:30:00+00:00"


def test_schedules_command_prints_next_fire_times(
    make_yard: Callable[[dict[str, str]], Path], cli: Cli
) -> None:
    from engine.cli import main

    root = make_yard(
        {
            **YARD,
            "flows/add.yaml": YARD["flows/add.yaml"]
            + "schedule: {cron: '0 11 * * TUE', timezone: Europe/Paris}\n",
        }
    )
    result = cli(root, "schedules", "--json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    assert [(r["flow"], r["cron"], r["timezone"], r["misfire"], r["problem"]) for r in rows] == [
        ("add", "0 11 * * TUE", "Europe/Paris", "skip", None)
    ]
    upcoming = datetime.fromisoformat(rows[0]["next_fire"])
    assert upcoming > datetime.now(UTC) and upcoming.weekday() == 1  # a Tuesday
    text = cli(root, "schedules")
    lines = text.out.splitlines()
    assert lines[0].split() == [
        "FLOW",
        "CRON",
        "TIMEZONE",
        "MISFIRE",
        "NEXT",
        "FIRE",
        "LAST",
        "FIRE",
        "ORIGIN",
    ]
    assert lines[1].split()[:8] == ["add", "0", "11", "*", "*", "TUE", "Europe/Paris", "skip"]
    assert lines[1].split()[-2] == "-"  # never fired
    assert lines[1].split()[-1].endswith("add.yaml")  # said in the yard's files, not over the API
    (root / "flows/add.yaml").write_text(YARD["flows/add.yaml"] + "schedule: {cron: '0 11 * *'}\n")
    assert main(["schedules", "--root", str(root)]) == 1
    empty = make_yard(YARD)
    assert main(["schedules", "--root", str(empty)]) == 0


def _midnight_in_paris(when: datetime) -> bool:
    local = when.astimezone(ZoneInfo("Europe/Paris"))
    return (local.hour, local.minute) == (0, 0)


def _last_friday_at_9(when: datetime) -> bool:
    return (when.weekday(), when.hour, when.minute) == (4, 9, 0) and (
        when + timedelta(days=7)
    ).month != when.month


NEVER = (
    "flows/add.yaml:12:18: error BY510 schedule: cron '0 0 30 2 *' never fires: no date in the next 50 years "
    "matches it (is the day of month one the month has?)"
)


@pytest.mark.parametrize(
    ("schedule", "server_next_fire", "cli_next_fire"),
    [
        (
            "{cron: '@daily', timezone: Europe/Paris, inputs: {a: 1}}",
            "2026-05-04T22:00:00+00:00",
            _midnight_in_paris,
        ),
        ("{cron: '0 9 * * 5L', inputs: {a: 1}}", "2026-05-29T09:00:00+00:00", _last_friday_at_9),
        ("{cron: '0 0 30 2 *', inputs: {a: 1}}", None, None),
    ],
    ids=["@daily", "5L", "never fires"],
)
def test_validate_schedules_and_the_server_judge_a_schedule_alike(
    schedule: str,
    server_next_fire: str | None,
    cli_next_fire: Callable[[datetime], bool] | None,
    make_yard: Callable[[dict[str, str]], Path],
    serve: Callable[..., Live],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main
    from engine.validate.command import validate

    root = make_yard({**YARD, "flows/add.yaml": YARD["flows/add.yaml"] + f"schedule: {schedule}\n"})
    monkeypatch.chdir(root)  # validate shows paths relative to the current directory
    report = validate([], root)
    assert [d.format() for d in report.diagnostics] == ([] if server_next_fire else [NEVER])

    clock = ManualClock(datetime(2026, 5, 4, 6, 0, tzinfo=UTC))  # a Monday
    live = serve(root, watch=False, clock=clock)
    with live.client() as client:
        listing = client.get("/flows")
        assert listing.status_code == 200
        diagnostics = client.get("/diagnostics").json()
        assert diagnostics["diagnostics"] == [d.as_dict() for d in report.diagnostics]
        if server_next_fire is None:  # held back, and said why
            assert [f["name"] for f in listing.json()["flows"]] == ["slow"]
            missing = client.get("/flows/add")
            assert missing.status_code == 404
            assert "its definition has errors" in missing.json()["error"]["message"]
        else:
            fired = wait_for(lambda: client.get("/flows/add").json()["schedule"]["next_fire"])
            assert fired == server_next_fire

    capsys.readouterr()
    assert main(["schedules", "--json", "--root", str(root)]) == (0 if server_next_fire else 1)
    [row] = json.loads(capsys.readouterr().out)
    if cli_next_fire is None:
        assert (row["problem"], row["next_fire"]) == (
            report.diagnostics[0].message.removeprefix("schedule: "),
            None,
        )
    else:
        assert row["problem"] is None and cli_next_fire(datetime.fromisoformat(row["next_fire"]))
    assert main(["schedules", "--root", str(root)]) == (0 if server_next_fire else 1)
    out, err = capsys.readouterr()
    assert ("error: cron '0 0 30 2 *' never fires" in out) is (server_next_fire is None)
    assert "Traceback" not in err and "internal error" not in err


@pytest.fixture
def serve_logging() -> Iterator[None]:
    """`serve` in-process sends the server's loggers to this test's stderr: give them back afterwards."""
    saved = [
        (logger, list(logger.handlers), logger.level, logger.propagate)
        for logger in map(logging.getLogger, (LOGGER, "uvicorn.error"))
    ]
    yield
    for logger, handlers, level, propagate in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def test_serve_refuses_an_exposed_address_without_a_token(
    yard: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, serve_logging: None
) -> None:
    monkeypatch.delenv("BLOCKYARD_TOKEN", raising=False)
    result = cli(yard, "serve", "--host", "0.0.0.0", "--port", "1")
    assert result.code == 2
    assert "refusing to listen on 0.0.0.0 without a token: set BLOCKYARD_TOKEN" in result.err
    assert "Traceback" not in result.err


def _serve_example(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """`blockyard serve` of a copy of the example yard, as a process of its own, and its port."""
    yard = copy_example_yard(tmp_path / "yard")
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in ENV.items() if k not in ("BLOCKYARD_TOKEN", "OPENAI_API_KEY")}
    server = processes.Popen(
        [sys.executable, "-m", "engine", "serve", "--port", str(port), "--root", str(yard)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return server, port


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_blockyard_serve_runs_the_example_yard(tmp_path: Path, stop: signal.Signals) -> None:
    """The real command on the repository's example yard, as a user would start and stop it."""
    server, port = _serve_example(tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: is_up(url), timeout=60, interval=0.1)
        with httpx.Client(base_url=url, timeout=30, verify=LOOPBACK) as client:
            assert "hello" in [f["name"] for f in client.get("/flows").json()["flows"]]
            result = client.post("/flows/hello/runs", json={"inputs": {"name": "Ada"}}).json()
            assert result["status"] == "finished"
            assert result["outputs"]["loud"] == result["outputs"]["greeting"].upper()
            # DNS rebinding: a page on another name that resolves to 127.0.0.1 reads nothing
            refused = client.get("/runs", headers={"Host": "evil.example"})
            assert (refused.status_code, refused.json()["error"]["code"]) == (
                421,
                "host_not_allowed",
            )
            assert client.get("/runs", headers={"Host": f"localhost:{port}"}).status_code == 200
    finally:
        server.send_signal(stop)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    log = stderr.splitlines()
    assert any("event=started" in line and "flows=" in line for line in log)
    assert any("event=run_ended" in line and "status=finished" in line for line in log)
    assert any("event=stopped" in line for line in log)
    assert all(line.startswith("time=") for line in log if line.strip()), stderr


def test_an_idle_keep_alive_connection_outlives_what_clients_keep_theirs(tmp_path: Path) -> None:
    """A client (httpx, Node: 5 s) reuses an idle connection it still holds; the server must not have
    closed it meanwhile, or the request is lost on the way (uvicorn's default: 5 s)."""
    server, port = _serve_example(tmp_path)
    try:
        wait_for(lambda: is_up(f"http://127.0.0.1:{port}"), timeout=60, interval=0.1)
        request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            answers = []
            for pause in (0.0, 6.0):  # the second request after the clients' 5 s expiry
                time.sleep(pause)
                conn.sendall(request)
                answers.append(_status_line(conn))
        assert answers == ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def _status_line(conn: socket.socket) -> str:
    """Read one whole response (its headers, then Content-Length bytes of body): its status line, or
    "" when the server closed the connection instead."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return ""
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    while len(body) < length:
        chunk = conn.recv(4096)
        assert chunk, "the connection closed in the middle of a response"
        body += chunk
    return lines[0]


def test_watch_reports_on_every_save(yard: Path) -> None:
    watcher = processes.Popen(
        [sys.executable, "-m", "engine", "watch", "--format", "json", "--root", str(yard)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())
        assert (first["ok"], first["changed"], first["diagnostics"]) == (True, [], [])
        (yard / "flows/add.yaml").write_text(YARD["flows/add.yaml"] + "bogus: 1\n")
        second = json.loads(watcher.stdout.readline())
        assert second["ok"] is False and second["changed"] == ["flows/add.yaml"]
        assert [(d["file"], d["code"]) for d in second["diagnostics"]] == [
            ("flows/add.yaml", "BY102")
        ]
        (yard / "flows/add.yaml").write_text(YARD["flows/add.yaml"])
        third = json.loads(watcher.stdout.readline())
        assert third["ok"] is True
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.communicate(timeout=30)
    assert watcher.returncode == 0


@pytest.mark.parametrize("fmt", ["text"])
def test_watch_text_output(yard: Path, fmt: str) -> None:
    watcher = processes.Popen(
        [sys.executable, "-m", "engine", "watch", "--root", str(yard)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().startswith("--- ")
        assert watcher.stdout.readline().startswith("no problems in 4 files")
        watcher.stdout.readline()  # timing
        (yard / "flows/add.yaml").write_text(YARD["flows/add.yaml"] + "bogus: 1\n")
        header = watcher.stdout.readline()
        assert header.startswith("--- ") and header.rstrip().endswith("flows/add.yaml")
        assert watcher.stdout.readline().startswith("flows/add.yaml:")
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.communicate(timeout=30)
