// A run as a timeline: a waterfall of its steps and its model calls, built from the run's events as
// they stream (docs/serve.md, "The web page"; docs/observability.md, "Seeing it").
//
// One row per visit of a step (a step run again by a loop gets a new row), per map item and foreach
// iteration (`data.index`, under their step), and per model call (`model_call`, under its step). A
// step's bar runs from step_started to step_finished/step_failed; a gate's from approval_required to
// its decision; a model call's bar ends at its event's time and starts `latency_ms` earlier. Subflow
// steps ("outer.inner") sit under their subflow step, a foreach's or loop's body under that step (the
// run's React Flow graph says which group a step is in). Every text goes through textContent.

import { costText, money } from "./spend.js";

const INDEX = "\u0000";  // between a step's label and its index in a row key: never in a label

function keyOf(step, index) {
  return `${step ?? ""}${INDEX}${index ?? ""}`;
}

function timeOf(event) {
  const t = Date.parse(event.time);
  return Number.isNaN(t) ? null : t;
}

const isNumber = (value) => typeof value === "number" && Number.isFinite(value);

function duration(ms) {
  if (!isNumber(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

function count(value) {
  return isNumber(value) ? String(value) : "?";
}

/** What one model call used and cost, in one line (its bar's text alternative and hover card). */
export function modelCallText(data) {
  const parts = [`model call ${data.provider || "?"}/${data.model || "?"}`];
  if (data.purpose && data.purpose !== "block") parts.push(data.purpose);
  if (isNumber(data.turn)) parts.push(`turn ${data.turn}`);
  let tokens = `tokens ${count(data.input_tokens)} in, ${count(data.output_tokens)} out`;
  const details = [];
  if (isNumber(data.cached_tokens)) details.push(`${data.cached_tokens} cached`);
  if (isNumber(data.reasoning_tokens)) details.push(`${data.reasoning_tokens} reasoning`);
  if (details.length) tokens += ` (${details.join(", ")})`;
  parts.push(tokens);
  parts.push(`cost ${isNumber(data.cost_usd) ? money(data.cost_usd) : "unknown"}`);
  let latency = `latency ${duration(data.latency_ms) || "?"}`;
  if (isNumber(data.ttft_ms)) latency += ` (first token ${duration(data.ttft_ms)})`;
  parts.push(latency);
  if (data.ok === false) parts.push(`failed: ${data.error || "error"}`);
  return parts.join(" · ");
}

/** A step's totals over its model calls (what `Spend` counts, engine/core/usage.py). */
function emptySpend() {
  return { model_calls: 0, input_tokens: 0, output_tokens: 0, cost_usd: 0, unpriced_calls: 0 };
}

function addCall(spend, data) {
  spend.model_calls += 1;
  if (isNumber(data.input_tokens)) spend.input_tokens += data.input_tokens;
  if (isNumber(data.output_tokens)) spend.output_tokens += data.output_tokens;
  if (isNumber(data.cost_usd)) spend.cost_usd += data.cost_usd;
  else spend.unpriced_calls += 1;
}

export class Timeline {
  /** `graph`: the run's React Flow graph (or null): which group (foreach, loop) each step is in. */
  constructor(graph = null) {
    this.rows = [];  // in the order they began
    this.open = new Map();  // row key -> its latest row (a closed one stays until a new visit)
    this.groupOf = new Map();  // step id -> the step whose group (foreach, loop body) it is in
    this.first = null;  // the time of the run's first event (ms)
    this.last = null;  // the time of its latest event (ms)
    this.received = 0;  // when the latest event arrived here (ms, this browser's clock)
    this.status = "running";
    this.setGraph(graph);
  }

  setGraph(graph) {
    this.groupOf.clear();
    if (!graph) return;
    const owner = new Map((graph.groups || []).map((group) => [group.id, group.step]));
    for (const node of graph.nodes || []) {
      const group = node.data && node.data.view ? node.data.view.group : null;
      const step = group ? owner.get(group) : null;
      if (step && step !== node.id) this.groupOf.set(node.id, step);
    }
  }

  /** The time the timeline reaches: the latest event, or — while the run goes on — now, as the
   * server's clock reads it (the latest event's time plus how long ago it arrived: no clock skew). */
  end() {
    if (this.last === null) return null;
    return this.status === "running" ? Math.max(this.last, this.last + Date.now() - this.received) : this.last;
  }

  live() {
    return this.status === "running";
  }

  _row(kind, step, index, start, status, parent) {
    const row = { kind, step, index, start, end: null, status, parent, children: [], data: {}, calls: emptySpend(),
      seq: null };
    (parent ? parent.children : this.rows).push(row);
    return row;
  }

  /** The row an event of `step` (and `index`) belongs under: a subflow step under its subflow step, a
   * map item under its map, a foreach's or loop's body under that step. */
  _parentOf(step, index) {
    if (step === null || step === undefined) return null;
    if (index !== undefined && index !== null) {
      const whole = this.open.get(keyOf(step, null));
      if (whole) return whole;
    }
    const grouped = this.groupOf.get(step);
    if (grouped) {
      const row = this.open.get(keyOf(grouped, null));
      if (row) return row;
    }
    const dot = step.lastIndexOf(".");
    for (let cut = dot; cut > 0; cut = step.lastIndexOf(".", cut - 1)) {
      const row = this.open.get(keyOf(step.slice(0, cut), null));
      if (row) return row;
    }
    return null;
  }

  _begin(step, index, at, status, event) {
    const key = keyOf(step, index);
    const current = this.open.get(key);
    if (current && current.end === null) {  // a gate's decision goes on with the row its wait began
      current.status = status;
      return current;
    }
    const row = this._row(index !== null && index !== undefined ? "item" : "step", step, index, at, status,
      this._parentOf(step, index));
    row.seq = event.seq;
    this.open.set(key, row);
    return row;
  }

  /** Take one event of the run (in the order of their seq). */
  add(event) {
    const at = timeOf(event);
    if (at === null) return;
    if (this.first === null) this.first = at;
    this.last = this.last === null ? at : Math.max(this.last, at);
    this.received = Date.now();
    const data = event.data || {};
    const index = isNumber(data.index) ? data.index : null;
    switch (event.type) {
      case "run_started":
        this.status = "running";
        break;
      case "step_started": {
        const row = this._begin(event.step, index, at, "running", event);
        Object.assign(row.data, data);
        break;
      }
      case "approval_required":
        if (event.step) this._begin(event.step, index, at, "waiting", event);
        this.status = "waiting";
        break;
      case "step_finished":
      case "step_failed": {
        let row = this.open.get(keyOf(event.step, index));
        if (!row || row.end !== null) {  // its start is not in the trace (a step resumed inline): from its duration
          const took = isNumber(data.duration_ms) ? data.duration_ms : 0;
          row = this._begin(event.step, index, at - took, "running", event);
        }
        row.end = at;
        row.status = event.type === "step_finished" ? "finished" : "failed";
        Object.assign(row.data, data);
        break;
      }
      case "model_call": {
        const parent = this.open.get(keyOf(event.step, index)) || this.open.get(keyOf(event.step, null)) || null;
        const latency = isNumber(data.latency_ms) ? data.latency_ms : 0;
        const row = this._row("model_call", event.step, index, at - latency, data.ok === false ? "failed" : "finished",
          parent);
        row.end = at;
        row.data = data;
        row.seq = event.seq;
        for (let up = parent; up; up = up.parent) addCall(up.calls, data);
        break;
      }
      case "run_finished":
        this.status = "finished";
        break;
      case "run_failed":
        this.status = data.status || "failed";
        break;
      default:
        break;
    }
  }

  /** The rows, each after the one it sits under, with their depth. */
  flat() {
    const out = [];
    const walk = (rows, depth) => {
      for (const row of rows) {
        out.push([row, depth]);
        walk(row.children, depth + 1);
      }
    };
    walk(this.rows, 0);
    return out;
  }
}

function labelOf(row) {
  if (row.kind === "model_call") {
    const data = row.data;
    return `${data.model || "model"}${isNumber(data.turn) ? ` turn ${data.turn}` : ""}`;
  }
  const name = row.step || "run";
  return row.index !== null && row.index !== undefined ? `${name} [${row.index}]` : name;
}

/** A row's status as drawn: a step still open when its run stopped (not at a gate) was cut short. */
function shownStatus(row, timeline) {
  if (row.end !== null || row.status !== "running" || timeline.live()) return row.status;
  return timeline.status === "waiting" ? "waiting" : "interrupted";
}

function rowText(row, end, status) {
  if (row.kind === "model_call") return modelCallText(row.data);
  const parts = [`${row.kind === "item" ? "item" : "step"} ${labelOf(row)}`, status];
  const took = isNumber(row.data.duration_ms) && row.end !== null ? row.data.duration_ms : (row.end ?? end) - row.start;
  parts.push(duration(took));
  if (row.data.block) parts.push(`block ${row.data.block}`);
  if (row.calls.model_calls) {
    const calls = row.calls;
    parts.push(`${calls.model_calls} model call${calls.model_calls === 1 ? "" : "s"}`,
      `tokens ${calls.input_tokens} in, ${calls.output_tokens} out`, `cost ${costText(calls)}`);
  }
  if (row.status === "failed" && row.data.error) parts.push(`error: ${row.data.error}`);
  return parts.join(" · ");
}

/** Draw the timeline into `host` (replacing what it held); `h` makes elements (app.js). */
export function drawTimeline(host, timeline, h) {
  const end = timeline.end();
  const rows = timeline.flat();
  if (timeline.first === null || !rows.length) {
    host.replaceChildren(h("p", { class: "muted" }, "no steps yet"));
    return;
  }
  const span = Math.max(end - timeline.first, 1);
  const pct = (t) => `${(Math.min(Math.max((t - timeline.first) / span, 0), 1) * 100).toFixed(3)}%`;
  const items = rows.map(([row, depth]) => {
    const stop = row.end ?? end;
    const status = shownStatus(row, timeline);
    const text = rowText(row, end, status);
    const bar = h("span", { class: `tl-bar status-${status}`, tabindex: "0", role: "img", "aria-label": text,
      "data-kind": row.kind, "data-status": status },
      h("span", { class: "tl-card", "aria-hidden": "true" }, text));
    if ((row.start - timeline.first) / span > 0.5) bar.classList.add("tl-late");  // its card opens to the left
    bar.style.left = pct(row.start);
    bar.style.width = `calc(${pct(stop)} - ${pct(row.start)})`;
    const item = h("li", { class: `tl-row tl-${row.kind}`, "data-kind": row.kind, "data-step": row.step ?? "",
      "data-status": status },
    h("span", { class: "tl-label", title: labelOf(row) }, labelOf(row)),
    h("span", { class: "tl-track" }, bar));
    if (row.index !== null && row.index !== undefined) item.dataset.index = String(row.index);
    if (row.seq !== null && row.seq !== undefined) item.dataset.seq = String(row.seq);
    item.style.setProperty("--depth", String(depth));
    return item;
  });
  const totals = emptySpend();
  for (const [row] of rows) if (row.kind === "model_call") addCall(totals, row.data);
  const summary = `${duration(span)} · ${rows.filter(([row]) => row.kind !== "model_call").length} steps`
    + (totals.model_calls ? ` · ${totals.model_calls} model calls · ${totals.input_tokens + totals.output_tokens}`
      + ` tokens · cost ${costText(totals)}` : "");
  host.replaceChildren(h("p", { class: "tl-summary muted" }, summary),
    h("ol", { class: "tl-rows", "aria-label": "the run's steps and model calls over time" }, ...items));
}
