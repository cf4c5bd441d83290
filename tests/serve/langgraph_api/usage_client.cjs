// The usage_metadata the JavaScript client (@langchain/langgraph-sdk from npm) sees on a conversation's AI
// messages (docs/langgraph-api.md).
//
//     node usage_client.cjs <folder holding node_modules/@langchain/langgraph-sdk> <server URL of the /lg prefix>
//
// It streams one turn of support_chat (values and messages-tuple) and reads the thread's state, and prints what
// it saw as one JSON object; the pytest test (test_usage_sdk_js.py) compares it with the run's model_call events.
"use strict";

const { createRequire } = require("node:module");
const path = require("node:path");

const [prefix, apiUrl] = process.argv.slice(2);
const { Client } = createRequire(path.join(prefix, "package.json"))("@langchain/langgraph-sdk");

async function main() {
  const client = new Client({ apiUrl });
  const thread = await client.threads.create();
  const parts = [];
  for await (const part of client.runs.stream(thread.thread_id, "support_chat", {
    input: { messages: [{ type: "human", content: "My name is Ada" }] },
    streamMode: ["values", "messages-tuple"],
  })) parts.push({ event: part.event, data: part.data });
  const values = parts.filter((p) => p.event === "values");
  const state = await client.threads.getState(thread.thread_id);
  const seen = {
    run_id: parts[0].data.run_id,
    streamed: values[values.length - 1].data.messages.at(-1).usage_metadata,
    chunks: parts.filter((p) => p.event === "messages").map((p) => p.data[0].usage_metadata ?? null),
    state: state.values.messages.at(-1).usage_metadata,
  };
  process.stdout.write(JSON.stringify(seen));
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
