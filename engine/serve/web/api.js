// Talking to the server: JSON calls with the bearer token (when one is needed), and server-sent
// events read through fetch (EventSource cannot send an Authorization header), resumed with
// Last-Event-ID after a dropped connection so no event is missed.

const TOKEN_KEY = "blockyard-token";

export class AuthNeeded extends Error {}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra = {}) {
  const h = { ...extra };
  if (token()) h.Authorization = `Bearer ${token()}`;
  return h;
}

/** GET or POST JSON; throws AuthNeeded on 401 and Error(message) on other failures. */
export async function call(method, path, body = undefined) {
  const init = { method, headers: headers({ Accept: "application/json" }) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) throw new AuthNeeded("a token is needed");
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : `${response.status} ${response.statusText}`;
    throw new Error(message);
  }
  return data;
}

function parseBlock(block) {
  const event = { id: null, type: "message", data: [] };
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") event.id = value;
    else if (field === "event") event.type = value;
    else if (field === "data") event.data.push(value);
  }
  return event.data.length ? event : null;
}

/** Read an SSE response body, calling onBlock({id, type, data}) for each message; returns at its end. */
async function readEvents(response, onBlock) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      const event = parseBlock(block);
      if (event) onBlock(event);
    }
  }
}

/**
 * Follow an SSE url; onEvent(parsedJson) for each event. Reconnects (with Last-Event-ID) until
 * the server ends the stream normally or `signal` aborts. Returns when done.
 */
export async function follow(path, onEvent, signal, lastId = null) {
  let delay = 500;
  while (!signal.aborted) {
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (lastId !== null) h["Last-Event-ID"] = String(lastId);
      const response = await fetch(path, { headers: h, signal });
      if (response.status === 401) throw new AuthNeeded("a token is needed");
      if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
      await readEvents(response, (event) => {
        if (event.id !== null) lastId = event.id;
        onEvent(JSON.parse(event.data.join("\n")));
        delay = 500;
      });
      return;  // the server finished the stream: the run settled
    } catch (error) {
      if (signal.aborted || error instanceof AuthNeeded) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 5000);
    }
  }
}

/**
 * POST a JSON body and read the answer as server-sent events: onEvent(name, parsedJson) for each
 * (a thread turn: `thread_id`, the run's events, `complete` or `error`). Not retried: a POST starts
 * something; a caller that loses the stream follows the run's events instead.
 */
export async function postStream(path, body, onEvent, signal) {
  const init = { method: "POST", signal, body: JSON.stringify(body),
    headers: headers({ Accept: "text/event-stream", "Content-Type": "application/json" }) };
  const response = await fetch(path, init);
  if (response.status === 401) throw new AuthNeeded("a token is needed");
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try { message = (await response.json()).error.message; } catch { /* not a JSON problem */ }
    throw new Error(message);
  }
  await readEvents(response, (event) => onEvent(event.type, JSON.parse(event.data.join("\n"))));
}
