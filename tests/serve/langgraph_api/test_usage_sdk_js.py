"""The usage_metadata of AI messages as the JavaScript client, `@langchain/langgraph-sdk` from npm (the version
test_langgraph_sdk_js.py pins), sees it in Node: equal to the sums of the run's model_call events. Without node
or npm the test skips, and fails under `CI=true`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from engine.core.usage import Spend
from engine.serve.langgraph_api.messages import usage_metadata
from tests.conftest import skip_or_fail
from tests.serve.langgraph_api.test_langgraph_sdk_js import SDK_VERSION
from tests.serve.serve_helpers import Live
from tests.support.npm import npm_package

SCRIPT = Path(__file__).with_name("usage_client.cjs")


def test_the_javascript_client_sees_the_usage_of_a_turn(live: Live) -> None:
    node = shutil.which("node")
    if node is None:
        skip_or_fail("the JavaScript client test needs node (`apt-get install -y nodejs npm`)")
        raise AssertionError("unreachable")
    prefix = npm_package("@langchain/langgraph-sdk", SDK_VERSION)
    env = {key: value for key, value in os.environ.items() if key != "LANGGRAPH_API_KEY"}
    done = subprocess.run(
        [node, str(SCRIPT), str(prefix), live.url + "/lg"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    with live.client() as http:
        trace = http.get(
            f"/runs/{seen['run_id']}/events", headers={"Accept": "application/json"}
        ).json()["events"]
    whole, answer = Spend(), Spend()
    for event in trace:
        if event["type"] == "model_call":
            whole.add(event["data"])
            if event["step"] == "answer":
                answer.add(event["data"])
    assert whole.input_tokens > 0
    assert seen["streamed"] == seen["state"] == usage_metadata(whole)
    assert [chunk for chunk in seen["chunks"] if chunk is not None] == [usage_metadata(answer)]
