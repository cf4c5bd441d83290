// `blockyard serve` driven by the JavaScript client, @langchain/langgraph-sdk from npm (docs/langgraph-api.md):
// chat, stream modes, branching (edit, regenerate, copy, a written reply), a gate, double texting, crons, the store.
//
//     node sdk_client.cjs <folder holding node_modules/@langchain/langgraph-sdk> <server URL of the /lg prefix>
//
// The API key, if the server has a token, comes in $LANGGRAPH_API_KEY (the client reads it itself). One process
// makes every call and prints one JSON object of what it saw on stdout; the pytest test
// (test_langgraph_sdk_js.py) asserts on it, so this script checks nothing itself and stops at the first error.
"use strict";

const { createRequire } = require("node:module");
const path = require("node:path");

const [prefix, apiUrl] = process.argv.slice(2);
const { Client } = createRequire(path.join(prefix, "package.json"))("@langchain/langgraph-sdk");

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push({ event: part.event, data: part.data });
  return parts;
}

async function main() {
  const client = new Client({ apiUrl });
  const seen = {};

  const assistants = await client.assistants.search({ limit: 100 });
  seen.assistants = assistants.map((a) => a.assistant_id);
  seen.gated = (await client.assistants.search({ graphId: "gated" })).map((a) => a.graph_id);

  const thread = await client.threads.create({ metadata: { user: "ada" } });
  seen.thread = { id: thread.thread_id, status: thread.status, metadata: thread.metadata };

  // every stream mode a chat UI asks for, in one run: the JavaScript client calls token streaming
  // "messages-tuple", as the Python one does; the events arrive as `messages`
  const parts = await collect(client.runs.stream(thread.thread_id, "support_chat", {
    input: { messages: [{ type: "human", content: "My name is Ada" }] },
    streamMode: ["values", "updates", "messages-tuple"],
  }));
  seen.stream = {
    first: parts[0],
    events: parts.map((p) => p.event),
    tokens: parts.filter((p) => p.event === "messages").map((p) => p.data[0].content).join(""),
    updates: parts.filter((p) => p.event === "updates").map((p) => p.data),
    last_values: parts.filter((p) => p.event === "values").at(-1).data,
  };
  seen.second_turn = (await client.runs.wait(thread.thread_id, "support_chat", {
    input: { messages: [{ type: "human", content: "What is my name?" }] },
  })).messages.at(-1).content;
  const chat = await client.threads.getState(thread.thread_id);
  seen.chat_state = { messages: chat.values.messages.map((m) => [m.type, m.content]), next: chat.next };

  // branching: a new first message from the thread's start, an answer regenerated on the first branch, a copy
  // of the thread and a reply written into the copy
  const inputOf = (history, said) =>
    history.find((h) => h.metadata.source === "input" && h.values.messages.at(-1).content === said &&
      h.values.messages[0].content === "My name is Ada");
  const before = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  const edited = await client.runs.wait(thread.thread_id, "support_chat", {
    input: { messages: [{ type: "human", content: "My name is Bob" }] },
    checkpoint: inputOf(before, "My name is Ada").parent_checkpoint,
  });
  const askedAgain = await client.runs.wait(thread.thread_id, "support_chat", {
    input: { messages: [{ type: "human", content: "What is my name?" }] },
  });
  const regenerated = await client.runs.wait(thread.thread_id, "support_chat", {
    checkpointId: inputOf(before, "What is my name?").checkpoint.checkpoint_id,
  });
  const after = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  seen.branching = {
    edited: edited.messages.map((m) => m.content),
    asked_again: askedAgain.messages.map((m) => m.content),
    regenerated: regenerated.messages.map((m) => m.content),
    history: after.length,
    from_start: after.filter((h) => h.parent_checkpoint?.checkpoint_id === "__start__").length,
  };
  const copy = await client.threads.copy(thread.thread_id);
  const written = await client.threads.updateState(copy.thread_id, {
    values: { messages: [{ type: "human", content: "Thanks" }, { type: "ai", content: "Welcome." }] },
    asNode: "answer",
  });
  seen.copied = {
    id: copy.thread_id,
    messages: copy.values.messages.map((m) => m.content),
    written: written.checkpoint.checkpoint_id,
    after_write: (await client.threads.getState(copy.thread_id)).values.messages.map((m) => m.content),
    original: (await client.threads.getState(thread.thread_id)).values.messages.map((m) => m.content),
  };

  // the approval gate: an interrupt, a wrong answer refused, the right one resumes the run
  const gated = await client.threads.create();
  const waiting = await client.runs.wait(gated.thread_id, "gated", { input: { a: 1 } });
  const state = await client.threads.getState(gated.thread_id);
  seen.interrupt = {
    value: waiting.__interrupt__[0].value,
    id: waiting.__interrupt__[0].id,
    state_next: state.next,
    state_interrupt_ids: state.tasks.flatMap((t) => t.interrupts.map((i) => i.id)),
    status: (await client.threads.get(gated.thread_id)).status,
  };
  try {
    await client.runs.wait(gated.thread_id, "gated", { command: { resume: { b: "five" } } });
    seen.wrong_resume = { status: null };
  } catch (error) {
    seen.wrong_resume = { status: error.status ?? null, message: String(error.message) };
  }
  const resumed = await collect(client.runs.stream(gated.thread_id, "gated", {
    command: { resume: { b: 5 } }, streamMode: "values",
  }));
  seen.resumed = { last: resumed.at(-1).data, events: resumed.map((p) => p.event) };
  const done = await client.threads.getState(gated.thread_id);
  seen.done_state = { values: done.values, next: done.next, tasks: done.tasks };
  seen.done_status = (await client.threads.get(gated.thread_id)).status;

  // double texting: each strategy with a turn going on
  const busy = await client.threads.create();
  const going = await client.runs.create(busy.thread_id, "sleepy", { input: {} });
  try {
    await client.runs.create(busy.thread_id, "sleepy", { input: {}, multitaskStrategy: "reject" });
    seen.rejected = { status: null };
  } catch (error) {
    seen.rejected = { status: error.status ?? null };
  }
  const queued = await client.runs.create(busy.thread_id, "sleepy", {
    input: {}, multitaskStrategy: "enqueue",
  });
  seen.enqueued = queued.status;
  const interrupting = await client.runs.create(busy.thread_id, "sleepy", {
    input: {}, multitaskStrategy: "interrupt",
  });
  seen.after_interrupt = {
    going: (await client.runs.get(busy.thread_id, going.run_id)).status,
    queued: (await client.runs.get(busy.thread_id, queued.run_id)).status,
  };
  const rolling = await client.runs.create(busy.thread_id, "sleepy", {
    input: {}, multitaskStrategy: "rollback",
  });
  await client.runs.join(busy.thread_id, rolling.run_id);
  seen.after_rollback = (await client.runs.list(busy.thread_id)).map((r) => [r.run_id, r.status]);
  seen.multitask_ids = {
    going: going.run_id, queued: queued.run_id, interrupting: interrupting.run_id,
    rolling: rolling.run_id,
  };

  // crons: made, listed and deleted (the scheduler firing them: test_crons.py)
  const cron = await client.crons.create("hello", { schedule: "0 9 * * 1", input: { name: "Ada" } });
  seen.cron = {
    made: [cron.assistant_id, cron.schedule, cron.timezone, cron.enabled],
    listed: (await client.crons.search({ assistantId: "hello" })).map((c) => c.cron_id),
    id: cron.cron_id,
  };
  await client.crons.delete(cron.cron_id);
  seen.cron.after_delete = (await client.crons.search({ assistantId: "hello" })).length;

  // a missing store item is null, as LangGraph's server answers: client code checks for it
  seen.missing_item = await client.store.getItem(["users", "nobody"], "lunch");

  process.stdout.write(JSON.stringify(seen));
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
