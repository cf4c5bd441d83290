// Draw a flow as SVG from its React Flow graph (GET /flows/{name}?format=reactflow, a run's `reactflow`;
// docs/reactflow.md): {nodes: [{id, type, position, data: {label, isStart, view: {kind, lines, shape, group}}}],
// edges: [{id, source, target, sourceHandle, label, style, data: {kind}}], groups: [{id, label, parent}]}.
// Nodes sit where the export's layout put them (rows of Y_GAP, columns of X_GAP); the page adds the
// start terminal above the entry and the end terminal below, reached by every node the flow ends at.
// An edge down the rows is a curve; an edge back up (a loop, a rework branch) an arc on the side.

const SVG = "http://www.w3.org/2000/svg";
let drawn = 0;  // marker ids must be unique in the document, or hidden graphs hide the arrows
const CHAR_W = 7, NODE_H = 32, PAD_X = 14, MARGIN = 24, X_GAP = 260, Y_GAP = 140;
export const START = "__start__", END = "__end__";

function el(name, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

function shapeOf(g, shape, w, h) {
  const attrs = { x: -w / 2, y: -h / 2, width: w, height: h, rx: 4 };
  switch (shape) {
    case "diamond": return el("polygon", { points: `0,${-h / 2 - 6} ${w / 2 + 8},0 0,${h / 2 + 6} ${-w / 2 - 8},0` }, g);
    case "hexagon": return el("polygon", { points: `${-w / 2},0 ${-w / 2 + 10},${-h / 2} ${w / 2 - 10},${-h / 2} ${w / 2},0 ${w / 2 - 10},${h / 2} ${-w / 2 + 10},${h / 2}` }, g);
    case "circle": return el("ellipse", { rx: w / 2, ry: h / 2 }, g);
    case "stadium": case "round": attrs.rx = h / 2; break;
    case "subroutine": {
      const r = el("rect", attrs, g);
      el("line", { x1: -w / 2 + 6, y1: -h / 2, x2: -w / 2 + 6, y2: h / 2, stroke: "#7c6fe6" }, g);
      el("line", { x1: w / 2 - 6, y1: -h / 2, x2: w / 2 - 6, y2: h / 2, stroke: "#7c6fe6" }, g);
      return r;
    }
    default: break;
  }
  return el("rect", attrs, g);
}

// the graph's nodes and edges plus the start and end terminals (the export leaves them implicit)
function withTerminals(graph) {
  const nodes = (graph.nodes || []).map((n) => ({ ...n, view: (n.data && n.data.view) || { kind: n.type, lines: [String((n.data && n.data.label) || n.id)], shape: "box" } }));
  const ids = new Set(nodes.map((n) => n.id));
  const edges = (graph.edges || []).filter((e) => ids.has(e.source) && ids.has(e.target));
  if (!nodes.length) return { nodes, edges };
  const entry = nodes.find((n) => n.data && n.data.isStart) || nodes[0];
  const ys = nodes.map((n) => (n.position || {}).y || 0);
  const top = Math.min(...ys), bottom = Math.max(...ys);
  const xs = nodes.map((n) => (n.position || {}).x || 0);
  const centre = (Math.min(...xs) + Math.max(...xs)) / 2;
  const terminal = (id, x, y) => ({ id, type: "terminal", position: { x, y }, view: { kind: id === START ? "start" : "end", lines: [id === START ? "start" : "end"], shape: "terminal", group: null } });
  const all = [terminal(START, (entry.position || {}).x || 0, top - Y_GAP * 0.6), ...nodes];
  const added = [{ id: "start", source: START, target: entry.id, data: { kind: "next" }, synthetic: true }];
  const leaves = new Set(edges.map((e) => e.source));
  const ends = nodes.filter((n) => !leaves.has(n.id) && n.id !== END);
  let end = nodes.find((n) => n.id === END);
  if (!end && ends.length) {
    end = terminal(END, centre, bottom + Y_GAP * 0.6);
    all.push(end);
  } else if (end) {
    end.view = { ...end.view, kind: "end", shape: "terminal" };
  }
  for (const n of ends) added.push({ id: `end:${n.id}`, source: n.id, target: END, data: { kind: "next" }, synthetic: true });
  return { nodes: all, edges: [...added, ...edges] };
}

/** Draw a React Flow `graph`; `status` maps step id -> running|finished|failed|waiting for a run's view. */
export function drawGraph(graph, status = new Map()) {
  const { nodes, edges } = withTerminals(graph);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const size = new Map(nodes.map((n) => {
    const lines = n.view.lines.map(String);
    return [n.id, { w: Math.max(...lines.map((l) => l.length)) * CHAR_W + 2 * PAD_X, h: NODE_H + (lines.length - 1) * 14 }];
  }));
  // the export's columns are X_GAP apart: spread them when a node is wider than that
  const stretch = Math.max(1, ...[...size.values()].map((s) => (s.w + 24) / X_GAP));
  const xs = nodes.map((n) => n.position.x * stretch), ys = nodes.map((n) => n.position.y);
  const left = Math.min(...nodes.map((n, i) => xs[i] - size.get(n.id).w / 2));
  const top = Math.min(...nodes.map((n, i) => ys[i] - size.get(n.id).h / 2));
  const pos = new Map(nodes.map((n, i) => [n.id, { x: xs[i] - left + MARGIN, y: ys[i] - top + MARGIN + 12 }]));
  const isBack = (e) => pos.get(e.target).y <= pos.get(e.source).y;
  const loopRoom = edges.filter(isBack).reduce((room, e) => room + (e.label ? Math.max(24, Math.min(String(e.label).length, 24) * 6.2 + 12) : 24), 0)
    + (edges.some(isBack) ? 60 : 0);
  const right = Math.max(...nodes.map((n) => pos.get(n.id).x + size.get(n.id).w / 2));
  const width = right + MARGIN + loopRoom;
  const height = Math.max(...nodes.map((n) => pos.get(n.id).y + size.get(n.id).h / 2)) + MARGIN;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const defs = el("defs", {}, svg);
  const arrow = `arrow-${++drawn}`;
  const marker = el("marker", { id: arrow, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8b93a7" }, marker);

  const groups = graph.groups || [];
  const parent = new Map(groups.map((g) => [g.id, g.parent]));
  const inGroup = (n, id) => { for (let g = n.view.group; g; g = parent.get(g)) if (g === id) return true; return false; };
  for (const group of groups) {  // dashed boxes behind their member nodes (a nested body's nodes count too)
    const members = nodes.filter((n) => inGroup(n, group.id));
    if (!members.length) continue;
    const xs2 = members.flatMap((n) => [pos.get(n.id).x - size.get(n.id).w / 2, pos.get(n.id).x + size.get(n.id).w / 2]);
    const ys2 = members.flatMap((n) => [pos.get(n.id).y - size.get(n.id).h / 2, pos.get(n.id).y + size.get(n.id).h / 2]);
    const g = el("g", { class: "group", "data-group": group.id }, svg);
    const x = Math.min(...xs2) - 12, y = Math.min(...ys2) - 24;
    el("rect", { x, y, width: Math.max(...xs2) - x + 12, height: Math.max(...ys2) - y + 12, rx: 6 }, g);
    el("text", { x: x + 6, y: y + 13 }, g).textContent = group.label;
  }

  const pairs = new Map();  // several edges between one pair of nodes: stack their labels
  const bezier = (p, t) => {
    const u = 1 - t;
    return [0, 1].map((k) => u * u * u * p[0][k] + 3 * u * u * t * p[1][k] + 3 * u * t * t * p[2][k] + t * t * t * p[3][k]);
  };
  let loops = 0;
  for (const edge of edges) {
    const a = pos.get(edge.source), b = pos.get(edge.target), sa = size.get(edge.source), sb = size.get(edge.target);
    let points, t = 0.72;
    if (isBack(edge)) {  // an arc on the side, outside everything between its ends, each a little further out
      const lo = Math.min(a.y, b.y) - 1, hi = Math.max(a.y, b.y) + 1;
      const spanned = nodes.filter((n) => pos.get(n.id).y >= lo && pos.get(n.id).y <= hi);
      const side = Math.max(...spanned.map((n) => pos.get(n.id).x + size.get(n.id).w / 2)) + 30 + loops;
      loops += edge.label ? Math.max(24, Math.min(String(edge.label).length, 24) * 6.2 + 12) : 24;
      points = [[a.x + sa.w / 2, a.y], [side, a.y], [side, b.y], [b.x + sb.w / 2, b.y]];
      t = 0.5;
    } else {
      const from = [a.x, a.y + sa.h / 2], to = [b.x, b.y - sb.h / 2], mid = (from[1] + to[1]) / 2;
      points = [from, [from[0], mid], [to[0], mid], to];
    }
    const dashed = (edge.style && edge.style.strokeDasharray) ? "dashed" : "solid";
    const attrs = { d: `M${points[0]} C${points[1]} ${points[2]} ${points[3]}`, class: `edge ${dashed}`, "marker-end": `url(#${arrow})`,
      "data-kind": (edge.data && edge.data.kind) || "next" };
    if (!edge.synthetic) attrs["data-edge"] = edge.id;
    if (edge.sourceHandle) attrs["data-handle"] = edge.sourceHandle;
    el("path", attrs, svg);
    if (edge.label) {
      const key = edge.source + "\u0000" + edge.target;
      const nth = pairs.get(key) || 0;
      pairs.set(key, nth + 1);
      const [lx, ly] = bezier(points, t);  // near the target, where edges fanning out are apart
      const full = String(edge.label);
      const text = full.length > 24 ? full.slice(0, 23) + "…" : full;
      const g = el("g", {}, svg);
      const bgW = text.length * 6.2 + 6, y = ly - nth * 15;
      el("rect", { x: lx - bgW / 2, y: y - 8, width: bgW, height: 15, class: "edge-label-bg" }, g);
      el("text", { x: lx, y: y + 3, "text-anchor": "middle", class: "edge-label" }, g).textContent = text;
      el("title", {}, g).textContent = full;
    }
  }

  for (const node of nodes) {
    const p = pos.get(node.id), s = size.get(node.id);
    const kind = node.view.kind;
    const terminal = kind === "start" || kind === "end";
    const step = terminal ? null : node.id;  // React Flow ids are step ids (a loop's check is its loop's)
    const classes = ["node", `kind-${kind}`, `type-${node.type}`, terminal ? "terminal" : "", step && status.has(step) ? `s-${status.get(step)}` : ""];
    const g = el("g", { class: classes.join(" ").trim(), transform: `translate(${p.x},${p.y})`, "data-node": node.id }, svg);
    shapeOf(g, node.view.shape, s.w, s.h);
    const lines = node.view.lines.map(String);
    lines.forEach((line, i) => {
      const t = el("text", { x: 0, y: 4 + (i - (lines.length - 1) / 2) * 14, "text-anchor": "middle" }, g);
      t.textContent = line;
    });
    const label = lines.join("\n");
    el("title", {}, g).textContent = step && status.has(step) ? `${label}: ${status.get(step)}` : label;
  }
  return svg;
}
