// The Blockyard page: flows and their graphs, runs, live events, approvals, diagnostics, and
// conversations (threads: their history, the next message, the reply streaming in).
// Plain DOM code, no framework, no build step; every text from the server goes through
// textContent, never innerHTML.

import { AuthNeeded, call, follow, postStream, setToken } from "./api.js";
import { drawGraph } from "./graph.js";
import { collectValues, fieldInputs } from "./forms.js";
import { costText, spendSummary } from "./spend.js";
import { Timeline, drawTimeline, modelCallText } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 2000;
const state = { view: null, follow: null, gates: new Map(), runs: [], flows: [], threads: [], flowInputs: new Map() };
const enc = encodeURIComponent;

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const badge = (status) => h("span", { class: `badge status-${status}`, "data-status": status }, status);
const when = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "");
const seconds = (s) => (s ? `${Number(s).toFixed(s < 10 ? 2 : 0)} s` : "");
const pretty = (value) => JSON.stringify(value, null, 2);

function showAuth(error) {
  if (!(error instanceof AuthNeeded)) return false;
  $("token-form").hidden = false;
  $("server-state").textContent = "a token is needed";
  return true;
}

// ---- lists -------------------------------------------------------------------------------------

// The lists are redrawn every REFRESH_MS and after each navigation, but their rows are replaced only
// when what they show changed: a click whose press and release straddle a redraw lands on no row
// (the browser sends it to the list itself) and would be lost. An empty list shows `empty`, if given.
const shown = new WeakMap();
function redraw(container, items, row, empty = null) {
  const key = JSON.stringify([items, state.view]);
  if (shown.get(container) === key) return;
  shown.set(container, key);
  container.replaceChildren(...(!items.length && empty ? [h("li", { class: "muted" }, empty)] : items.map(row)));
}

function renderFlows(flows) {
  redraw($("flow-list"), flows, (flow) => {
    const item = h("li", { "data-flow": flow.name, onclick: () => { location.hash = `flow/${flow.name}`; } },
      h("span", { class: "name" }, flow.name), ` v${flow.version}`,
      flow.stale ? h("span", { class: "stale" }, " · serving last good version") : null,
      h("span", { class: "desc" }, flow.description || ""),
      flow.schedule && flow.schedule.next_fire ? h("span", { class: "desc" }, `next run ${new Date(flow.schedule.next_fire).toLocaleString()}`) : null);
    if (state.view && state.view.kind === "flow" && state.view.name === flow.name) item.classList.add("selected");
    return item;
  }, "no flows");
}

function renderRuns(runs) {
  redraw($("run-table").querySelector("tbody"), runs, (run) => {
    const row = h("tr", { "data-run": run.id, onclick: () => { location.hash = `run/${run.id}`; } },
      h("td", { title: `${run.id}, started ${when(run.started || run.created)}` }, run.id), h("td", {}, `${run.flow}@${run.version}`),
      h("td", {}, badge(run.status)), h("td", {}, seconds(run.duration)),
      h("td", { class: "cost", title: spendSummary(run.usage || run), "data-cost": costText(run.usage || run) },
        costText(run.usage || run, true)));
    if (state.view && state.view.kind === "run" && state.view.id === run.id) row.classList.add("selected");
    return row;
  });
}

function renderThreads(threads) {
  redraw($("thread-list"), threads, (thread) => {
    const item = h("li", { "data-thread": thread.id, onclick: () => { location.hash = `thread/${thread.id}`; } },
      h("span", { class: "name" }, thread.name || thread.id),
      h("span", { class: "desc" }, `${thread.flow || "no flow yet"} · ${thread.turns} turn${thread.turns === 1 ? "" : "s"}`
        + ` · ${when(thread.updated)}`));
    if (state.view && state.view.kind === "thread" && state.view.id === thread.id) item.classList.add("selected");
    return item;
  }, "none");
}

function renderDiagnostics(report) {
  const banner = $("diagnostics");
  const problems = report.diagnostics.filter((d) => d.severity === "error");
  const stale = Object.keys(report.stale || {});
  banner.hidden = problems.length === 0 && !report.reload_error;
  if (banner.hidden) return;
  banner.className = "banner bad";
  const serving = stale.filter((name) => report.stale[name].serving_version !== null);
  const held = stale.filter((name) => report.stale[name].serving_version === null);
  $("diagnostics-title").textContent = `${problems.length} problem${problems.length === 1 ? "" : "s"} in the yard`
    + (serving.length ? ` — still serving the last good version of: ${serving.join(", ")}` : "")
    + (held.length ? ` — not served: ${held.join(", ")}` : "");
  const lines = problems.map((d) => h("li", {}, `${d.file}:${d.line}:${d.col}: ${d.code} ${d.message}`));
  if (report.reload_error) lines.unshift(h("li", {}, `reload failed: ${report.reload_error}`));
  $("diagnostics-list").replaceChildren(...lines);
}

async function renderApprovals(runs) {
  const pending = [];
  for (const run of runs.filter((each) => each.status === "waiting")) {
    for (const gate of await gatesOf(run)) pending.push({ run: run.id, flow: run.flow, step: gate.step, message: gate.message });
  }
  redraw($("approval-list"), pending, (item) =>
    h("li", { "data-approval": item.run, onclick: () => { location.hash = `run/${item.run}`; } },
      h("span", { class: "name" }, `${item.flow} · ${item.step || "gate"}`),
      h("span", { class: "desc" }, item.message || "approval required")), "none");
}

async function gatesOf(run) {
  const key = `${run.id}:${run.status}:${run.duration}`;
  if (!state.gates.has(key)) state.gates.set(key, (await call("GET", `/runs/${encodeURIComponent(run.id)}`)).gates || []);
  return state.gates.get(key);
}

async function refresh() {
  try {
    const [flows, runs, waiting, report, threads] = await Promise.all([call("GET", "/flows"),
      call("GET", "/runs?limit=30"), call("GET", "/runs?status=waiting&limit=100"), call("GET", "/diagnostics"),
      call("GET", "/threads?limit=30")]);
    state.flows = flows.flows;
    state.runs = runs.runs;
    state.threads = threads.threads;
    renderFlows(state.flows);
    renderRuns(state.runs);
    renderThreads(state.threads);
    renderDiagnostics(report);
    await renderApprovals(waiting.runs);
    $("server-state").textContent = `${state.flows.length} flows · reload #${report.generation}`;
    $("token-form").hidden = true;
  } catch (error) {
    if (!showAuth(error)) $("server-state").textContent = `server unreachable (${error.message})`;
  }
}

// ---- flow view ---------------------------------------------------------------------------------

async function showFlow(name) {
  const flow = await call("GET", `/flows/${encodeURIComponent(name)}`);
  $("flow-title").textContent = `${flow.name} v${flow.version}`;
  $("flow-description").textContent = flow.description || "";
  const schedule = $("flow-schedule");
  schedule.hidden = !flow.schedule;
  if (flow.schedule) {
    schedule.textContent = `schedule ${flow.schedule.cron} (${flow.schedule.timezone})`
      + (flow.schedule.next_fire ? ` · next ${new Date(flow.schedule.next_fire).toLocaleString()}` : "");
  }
  // the drawing is the flow's React Flow graph (docs/reactflow.md); a flow that cannot be drawn says why
  const drawing = await call("GET", `/flows/${encodeURIComponent(name)}?format=reactflow`).catch((error) => error);
  $("flow-graph").replaceChildren(drawing instanceof Error || !flow.graph
    ? h("p", { class: "muted" }, flow.graph_error || (drawing instanceof Error ? drawing.message : "no graph"))
    : drawGraph(drawing));
  $("run-inputs").replaceChildren(...fieldInputs(flow.inputs || {}, "input"));
  $("run-form-error").textContent = "";
  $("run-form").onsubmit = async (event) => {
    event.preventDefault();
    $("run-form-error").textContent = "";
    try {
      const inputs = collectValues($("run-inputs"), flow.inputs || {});
      const started = await call("POST", `/flows/${encodeURIComponent(name)}/runs?wait=false`, { inputs });
      location.hash = `run/${started.run_id}`;
    } catch (error) {
      if (!showAuth(error)) $("run-form-error").textContent = error.message;
    }
  };
  $("chat-start-error").textContent = "";
  $("chat-start").onclick = async () => {
    try {
      const thread = await call("POST", "/threads", { flow: name });
      location.hash = `thread/${thread.id}`;
    } catch (error) {
      if (!showAuth(error)) $("chat-start-error").textContent = error.message;
    }
  };
  $("flow-detail").hidden = false;
}

// ---- run view ----------------------------------------------------------------------------------

function gateForm(run, gate) {
  const fields = h("div", { class: "fields" }, ...fieldInputs(gate.fields || {}, "gate"));
  const reason = h("input", { name: "reason", placeholder: "reason (optional)", "data-reason": "" });
  const actor = h("input", { name: "actor", placeholder: "your name", "data-actor": "" });
  const named = (gate.approvers || []).length > 0;
  // an agent's tool call (`approve_tools`) says which decisions its block allows; a changed field is an edit
  const allowed = Array.isArray(gate.allowed) ? gate.allowed : null;
  const may = (word) => allowed === null || allowed.includes(word);
  const error = h("span", { class: "error", role: "alert" });
  const decide = async (approve) => {
    error.textContent = "";
    try {
      const values = approve ? collectValues(fields, gate.fields || {}) : {};
      await call("POST", `/runs/${encodeURIComponent(run.id)}/resume?wait=false`,
        { approve, values, reason: reason.value || null, gate: gate.gate || gate.step || null,
          actor: named ? actor.value || null : null });
      await showRun(run.id);
    } catch (problem) {
      if (!showAuth(problem)) error.textContent = problem.message;
    }
  };
  return h("form", { class: "gate", "data-gate": gate.gate || gate.step || "", onsubmit: (e) => e.preventDefault() },
    h("p", {}, h("strong", {}, gate.kind === "tool" ? "Tool call needs approval" : "Approval needed"),
      gate.step ? ` at ${gate.step}` : "", ": ", gate.message || ""),
    allowed ? h("p", { class: "muted" }, `allowed: ${allowed.join(", ")}`) : null,
    (gate.approvers || []).length ? h("p", { class: "muted" }, `approvers: ${gate.approvers.join(", ")}`) : null,
    gate.timeout ? h("p", { class: "muted" }, `times out after ${gate.timeout} (then ${gate.on_timeout || "reject"})`) : null,
    fields, h("div", { class: "fields" }, h("label", {}, "reason"), reason,
      named ? h("label", {}, "decided by") : null, named ? actor : null),
    h("div", { class: "buttons" },
      may("approve") || may("edit")
        ? h("button", { type: "button", "data-action": "approve", onclick: () => decide(true) }, "Approve")
        : null,
      may("reject")
        ? h("button", { type: "button", class: "secondary", "data-action": "reject", onclick: () => decide(false) }, "Reject")
        : null),
    error);
}

function renderRun(run, status) {
  $("run-title").textContent = `${run.flow}@${run.version} · ${run.id}`;
  $("run-status").replaceChildren(badge(run.status));
  $("run-meta").textContent = `started ${when(run.started || run.created)}` + (run.duration ? ` · ${seconds(run.duration)}` : "")
    + ` · inputs ${JSON.stringify(run.inputs)}`;
  $("run-outputs").textContent = run.outputs ? pretty(run.outputs) : "—";
  $("run-error").hidden = !run.error;
  $("run-error").textContent = run.error ? `${run.error_step ? `step ${run.error_step}: ` : ""}${run.error}` : "";
  // rebuild the gate forms only when the gates change: a refresh must not wipe what someone is typing
  const gates = run.status === "waiting" ? run.gates || [] : [];
  const key = `${run.id}:` + gates.map((g) => g.interrupt_id || g.gate || g.step).join(",");
  if ($("run-approvals").dataset.key !== key) {
    $("run-approvals").dataset.key = key;
    $("run-approvals").replaceChildren(...gates.map((g) => gateForm(run, g)));
  }
  $("run-graph").replaceChildren(run.reactflow ? drawGraph(run.reactflow, status) : h("span"));
}

// The engine's event types come from the server (GET /vocabulary, declared once in engine/core/events.py), never
// from a list kept here: any other type is a step's custom event (`emit:`). Asked once; again after a failure.
let vocabulary = null;

function engineVocabulary() {
  if (!vocabulary) {
    vocabulary = call("GET", "/vocabulary").then((names) => ({ events: new Set(names.event_types),
      terminal: new Set(names.terminal_event_types) }));
    vocabulary.catch(() => { vocabulary = null; });
  }
  return vocabulary;
}

function isCustomEvent(event, names) {
  return !names.events.has(event.type);
}

function describeEvent(event, names) {
  const data = event.data || {};
  if (isCustomEvent(event, names)) return JSON.stringify(data);
  if (event.type === "run_finished") return `outputs ${JSON.stringify(data.outputs)}`;
  if (event.type === "run_failed") return data.error || "";
  if (event.type === "step_finished") return data.duration_ms !== undefined ? `${data.duration_ms} ms` : "";
  if (event.type === "approval_required") return (data.value && data.value.message) || "";
  if (event.type === "token") return data.text || data.value || "";
  if (event.type === "model_call") return modelCallText(data);
  if (event.type === "file_written") return `wrote ${data.path} (${data.bytes} bytes)`;
  return "";
}

async function showRun(id) {
  if (state.follow) state.follow.abort();
  const controller = new AbortController();
  state.follow = controller;
  const names = await engineVocabulary();
  let run = await call("GET", `/runs/${encodeURIComponent(id)}`);
  const status = new Map();
  renderRun(run, status);
  $("run-detail").hidden = false;
  const list = $("run-events");
  list.replaceChildren();
  // the timeline is drawn once per frame however many events arrive, and ticks while the run goes on
  const timeline = new Timeline(run.reactflow || null);
  let frame = null;
  const redraw = () => {
    if (frame !== null || controller.signal.aborted) return;
    frame = requestAnimationFrame(() => { frame = null; if (!controller.signal.aborted) drawTimeline($("run-timeline"), timeline, h); });
  };
  drawTimeline($("run-timeline"), timeline, h);
  const tick = setInterval(() => { if (controller.signal.aborted) clearInterval(tick); else if (timeline.live()) redraw(); }, 1000);
  controller.signal.addEventListener("abort", () => clearInterval(tick));
  const onEvent = (event) => {
    if (controller.signal.aborted) return;
    timeline.add(event);
    redraw();
    list.append(h("li", { "data-type": event.type, class: isCustomEvent(event, names) ? "custom" : "", value: event.seq },
      h("span", { class: "type" }, event.type), event.step ? ` ${event.step}` : "", " ", describeEvent(event, names)));
    list.scrollTop = list.scrollHeight;
    if (event.step) {
      const mark = { step_started: "running", step_finished: "finished", step_failed: "failed", approval_required: "waiting" }[event.type];
      if (mark) status.set(event.step, mark);
    }
    if (event.type === "run_started" || names.terminal.has(event.type)) {
      const next = { run_finished: "finished", run_failed: (event.data || {}).status || "failed", approval_required: "waiting", run_started: "running" }[event.type];
      $("run-status").replaceChildren(badge(next));
      if (event.type === "run_finished") $("run-outputs").textContent = pretty((event.data || {}).outputs);
      if (event.type !== "run_started") {
        call("GET", `/runs/${encodeURIComponent(id)}`).then((fresh) => { if (!controller.signal.aborted) { run = fresh; renderRun(run, status); } });
      }
    }
    if (run.reactflow) $("run-graph").replaceChildren(drawGraph(run.reactflow, status));
  };
  follow(`/runs/${encodeURIComponent(id)}/events`, onEvent, controller.signal).catch((error) => showAuth(error));
}

// ---- conversation view -------------------------------------------------------------------------

function messageItem(message) {
  const item = h("li", { class: message.role, "data-role": message.role, "data-index": message.index }, message.content);
  if (message.role === "assistant") item.append(h("a", { class: "trace", href: `#run/${message.run_id}` }, "trace"));
  return item;
}

/** The input a typed message goes to: the flow's `message` input, else its only text input. */
async function messageField(flow) {
  if (!state.flowInputs.has(flow)) state.flowInputs.set(flow, (await call("GET", `/flows/${enc(flow)}`)).inputs || {});
  const inputs = state.flowInputs.get(flow);
  if ("message" in inputs) return "message";
  const texts = Object.keys(inputs).filter((key) => (inputs[key].type || "string") === "string");
  return texts.length === 1 ? texts[0] : null;
}

function showEarlier(chat, link) {
  const button = $("chat-earlier");
  button.hidden = !link;
  button.onclick = async () => {
    const page = await call("GET", link);
    if (state.chat !== chat) return;
    $("chat-messages").prepend(...page.messages.map(messageItem));
    showEarlier(chat, page.links.prev);
  };
}

async function showThread(id) {
  const thread = await call("GET", `/threads/${enc(id)}`);
  const page = await call("GET", `/threads/${enc(id)}/history?newest=true&limit=50`);
  const chat = { id, flow: thread.flow, busy: false };
  state.chat = chat;
  $("chat-title").textContent = thread.name || id;
  $("chat-meta").textContent = `${thread.flow ? `flow ${thread.flow}` : "no flow yet"} · thread ${id}`;
  $("chat-state").replaceChildren(...(thread.last_status ? [badge(thread.last_status)] : []));
  const list = $("chat-messages");
  list.replaceChildren(...page.messages.map(messageItem));
  showEarlier(chat, page.links.prev);
  $("chat-error").textContent = "";
  $("chat-form").onsubmit = (event) => { event.preventDefault(); sendMessage(chat); };
  $("chat-detail").hidden = false;
  list.scrollTop = list.scrollHeight;
}

function finishReply(reply, mine, answer) {
  reply.classList.remove("pending");
  $("chat-state").replaceChildren(badge(answer.status));
  if (answer.message) {
    reply.textContent = answer.reply;
    reply.dataset.index = answer.message.index;
    mine.dataset.index = answer.message.index - 1;
  } else if (answer.status === "waiting") {
    reply.textContent = "(waiting for an approval)";
  } else {
    reply.classList.add("failed");
    reply.textContent = answer.error || `the turn ended ${answer.status}`;
  }
  reply.append(h("a", { class: "trace", href: `#run/${answer.run_id}` }, "trace"));
}

async function sendMessage(chat) {
  const text = $("chat-input").value;
  if (!text.trim() || chat.busy) return;
  $("chat-error").textContent = "";
  const field = chat.flow ? await messageField(chat.flow).catch(() => null) : null;
  if (!field) {
    $("chat-error").textContent = chat.flow ? `flow ${chat.flow} has no text input to send a message to`
      : "this conversation has no flow yet (start one from a flow's page)";
    return;
  }
  chat.busy = true;
  $("chat-send").disabled = true;
  const list = $("chat-messages");
  const mine = h("li", { class: "user", "data-role": "user" }, text);
  const reply = h("li", { class: "assistant pending", "data-role": "assistant", "data-tokens": "0" });
  list.append(mine, reply);
  list.scrollTop = list.scrollHeight;
  $("chat-input").value = "";
  let tokens = 0;
  const onEvent = (name, data) => {
    if (state.chat !== chat) return;
    if (name === "thread_id") {
      reply.dataset.run = data.run_id;
      $("chat-state").replaceChildren(badge("running"));
    } else if (name === "token") {  // the reply as the model writes it
      tokens += 1;
      reply.dataset.tokens = String(tokens);
      reply.append((data.data || {}).text || "");
    } else if (name === "thread_name") {
      $("chat-title").textContent = (data.data || {}).name || chat.id;
      $("chat-title").dataset.named = "";
    } else if (name === "complete") {
      finishReply(reply, mine, data);
    } else if (name === "error") {
      reply.classList.remove("pending");
      reply.classList.add("failed");
      reply.textContent = data.message || "the turn was refused";
    }
    list.scrollTop = list.scrollHeight;
  };
  try {
    await postStream(`/threads/${enc(chat.id)}/runs`, { inputs: { [field]: text } }, onEvent);
  } catch (error) {
    if (!showAuth(error) && state.chat === chat) {
      mine.remove();
      reply.remove();
      $("chat-input").value = text;
      $("chat-error").textContent = error.message;
    }
  } finally {
    chat.busy = false;
    $("chat-send").disabled = false;
    refresh();
  }
}

// ---- navigation --------------------------------------------------------------------------------

async function route() {
  const [kind, ...rest] = location.hash.replace(/^#/, "").split("/");
  const name = decodeURIComponent(rest.join("/"));
  if (state.follow) { state.follow.abort(); state.follow = null; }
  $("flow-detail").hidden = true;
  $("run-detail").hidden = true;
  $("chat-detail").hidden = true;
  state.chat = null;
  $("detail-empty").hidden = Boolean(kind && name);
  state.view = kind && name ? { kind, name, id: name } : null;
  try {
    if (kind === "flow" && name) await showFlow(name);
    else if (kind === "run" && name) await showRun(name);
    else if (kind === "thread" && name) await showThread(name);
  } catch (error) {
    if (!showAuth(error)) { $("detail-empty").hidden = false; $("detail-empty").textContent = error.message; }
  }
  renderFlows(state.flows);
  renderRuns(state.runs);
  renderThreads(state.threads);
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setToken($("token-input").value.trim());
  $("token-input").value = "";
  refresh();
  route();
});
window.addEventListener("hashchange", route);
refresh().then(route);
setInterval(refresh, REFRESH_MS);
