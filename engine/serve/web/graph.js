// Draw a flow graph as SVG: the JSON form of the engine's graph model (GET /flows/{name} `graph`:
// {direction, nodes: [{id, kind, label, shape, group}], edges: [{source, target, kind, label, style}], groups}),
// see docs/serve.md.
// A small layered layout: cycles are broken by a depth-first search, nodes are ranked by the
// longest path from the entry, ordered within a rank by the barycentre of their neighbours,
// and edges are drawn as curves (back-edges loop around on the side).

const SVG = "http://www.w3.org/2000/svg";
let drawn = 0;  // marker ids must be unique in the document, or hidden graphs hide the arrows
const CHAR_W = 7, NODE_H = 32, PAD_X = 14, GAP_MAIN = 64, GAP_CROSS = 26, MARGIN = 24;

function el(name, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

function rankNodes(ids, edges) {
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) if (e.source !== e.target && out.has(e.source) && out.has(e.target)) out.get(e.source).push(e.target);
  const state = new Map(), back = new Set(), order = [];
  const visit = (id) => {  // iterative DFS: big flows must not overflow the JS stack
    const stack = [[id, 0]];
    state.set(id, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const next = out.get(top[0])[top[1]++];
      if (next === undefined) { state.set(top[0], 2); order.push(top[0]); stack.pop(); continue; }
      if (state.get(next) === 1) back.add(top[0] + "\u0000" + next);
      else if (!state.has(next)) { state.set(next, 1); stack.push([next, 0]); }
    }
  };
  const indegree = new Map(ids.map((id) => [id, 0]));
  for (const [, targets] of out) for (const t of targets) indegree.set(t, indegree.get(t) + 1);
  for (const id of ids) if (indegree.get(id) === 0 && !state.has(id)) visit(id);
  for (const id of ids) if (!state.has(id)) visit(id);
  const rank = new Map(ids.map((id) => [id, 0]));
  for (const id of order.reverse()) {  // topological order of the graph without back-edges
    for (const t of out.get(id)) {
      if (!back.has(id + "\u0000" + t)) rank.set(t, Math.max(rank.get(t), rank.get(id) + 1));
    }
  }
  return { rank, back };
}

function orderRanks(ids, edges, rank) {
  const layers = [];
  for (const id of ids) (layers[rank.get(id)] ||= []).push(id);
  const up = new Map(ids.map((id) => [id, []])), down = new Map(ids.map((id) => [id, []]));
  for (const e of edges) {
    if (up.has(e.target) && down.has(e.source)) { up.get(e.target).push(e.source); down.get(e.source).push(e.target); }
  }
  const position = new Map();
  const index = () => layers.forEach((layer) => (layer || []).forEach((id, i) => position.set(id, i)));
  index();
  for (let sweep = 0; sweep < 6; sweep++) {  // barycentre sweeps, alternately downwards and upwards
    const downwards = sweep % 2 === 0;
    const order = downwards ? [...layers.keys()] : [...layers.keys()].reverse();
    for (const r of order) {
      const layer = layers[r] || [];
      const score = new Map(layer.map((id) => {
        const ns = (downwards ? up : down).get(id).filter((n) => rank.get(n) !== r);
        return [id, ns.length ? ns.reduce((sum, n) => sum + position.get(n), 0) / ns.length : position.get(id)];
      }));
      layer.sort((a, b) => score.get(a) - score.get(b));
      index();
    }
  }
  return layers.map((layer) => layer || []);
}

function shapeOf(g, node, w, h) {
  const attrs = { x: -w / 2, y: -h / 2, width: w, height: h, rx: 4 };
  switch (node.shape) {
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

/** Draw `graph`; `status` maps node id -> running|finished|failed|waiting for a run's view. */
export function drawGraph(graph, status = new Map()) {
  const nodes = graph.nodes || [];
  const ids = nodes.map((n) => n.id);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const edges = (graph.edges || []).filter((e) => byId.has(e.source) && byId.has(e.target));
  const horizontal = graph.direction === "LR" || graph.direction === "RL";
  const { rank, back } = rankNodes(ids, edges);
  const isBack = (e) => e.source === e.target || back.has(e.source + "\u0000" + e.target);
  // a long forward edge gets a virtual node in every rank it crosses, so it is routed around nodes
  const size = new Map(nodes.map((n) => {
    const lines = String(n.label).split("\n");
    return [n.id, { w: Math.max(...lines.map((l) => l.length)) * CHAR_W + 2 * PAD_X, h: NODE_H + (lines.length - 1) * 14 }];
  }));
  const all = [...ids];
  const chains = edges.map((e, i) => {
    if (isBack(e)) return null;
    const chain = [e.source];
    for (let r = rank.get(e.source) + 1; r < rank.get(e.target); r++) {
      const v = `\u0000v${i}.${r}`;
      rank.set(v, r);
      size.set(v, { w: 10, h: 10 });
      all.push(v);
      chain.push(v);
    }
    chain.push(e.target);
    return chain;
  });
  const segments = chains.filter(Boolean).flatMap((c) => c.slice(1).map((t, k) => ({ source: c[k], target: t })));
  const layers = orderRanks(all, segments, rank);
  // main axis = rank direction, cross axis = order within a rank
  const mainSize = (id) => (horizontal ? size.get(id).w : size.get(id).h);
  const crossSize = (id) => (horizontal ? size.get(id).h : size.get(id).w);
  const layerMain = layers.map((layer) => Math.max(0, ...layer.map(mainSize)));
  const layerCross = layers.map((layer) => layer.reduce((s, id) => s + crossSize(id), 0) + GAP_CROSS * Math.max(0, layer.length - 1));
  const widest = Math.max(0, ...layerCross);
  const pos = new Map();
  let main = MARGIN;
  layers.forEach((layer, r) => {
    let cross = MARGIN + (widest - layerCross[r]) / 2;
    for (const id of layer) {
      const c = cross + crossSize(id) / 2, m = main + layerMain[r] / 2;
      pos.set(id, horizontal ? { x: m, y: c } : { x: c, y: m });
      cross += crossSize(id) + GAP_CROSS;
    }
    main += layerMain[r] + GAP_MAIN;
  });
  const loopRoom = edges.filter(isBack).reduce((room, e) => room + (e.label ? Math.max(24, Math.min(String(e.label).length, 24) * 6.2 + 12) : 24), 0)
    + (edges.some(isBack) ? 60 : 0);
  const extent = main - GAP_MAIN + MARGIN;
  const width = horizontal ? extent : widest + 2 * MARGIN + loopRoom;
  const height = horizontal ? widest + 2 * MARGIN + loopRoom : extent;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const defs = el("defs", {}, svg);
  const arrow = `arrow-${++drawn}`;
  const marker = el("marker", { id: arrow, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8b93a7" }, marker);

  for (const group of graph.groups || []) {  // dashed boxes behind their member nodes
    const members = nodes.filter((n) => n.group === group.id && pos.has(n.id));
    if (!members.length) continue;
    const xs = members.flatMap((n) => [pos.get(n.id).x - size.get(n.id).w / 2, pos.get(n.id).x + size.get(n.id).w / 2]);
    const ys = members.flatMap((n) => [pos.get(n.id).y - size.get(n.id).h / 2, pos.get(n.id).y + size.get(n.id).h / 2]);
    const g = el("g", { class: "group" }, svg);
    const x = Math.min(...xs) - 12, y = Math.min(...ys) - 24;
    el("rect", { x, y, width: Math.max(...xs) - x + 12, height: Math.max(...ys) - y + 12, rx: 6 }, g);
    el("text", { x: x + 6, y: y + 13 }, g).textContent = group.label;
  }

  const pairs = new Map();  // several edges between one pair of nodes: stack their labels
  const bezier = (p, t) => {
    const u = 1 - t;
    return [0, 1].map((k) => u * u * u * p[0][k] + 3 * u * u * t * p[1][k] + 3 * u * t * t * p[2][k] + t * t * t * p[3][k]);
  };
  // where an edge leaves a node and enters the next one, along the main axis
  const exit = (id) => { const p = pos.get(id), s = size.get(id); return horizontal ? [p.x + s.w / 2, p.y] : [p.x, p.y + s.h / 2]; };
  const entry = (id) => { const p = pos.get(id), s = size.get(id); return horizontal ? [p.x - s.w / 2, p.y] : [p.x, p.y - s.h / 2]; };
  const curve = (a, b) => {
    const mid = horizontal ? (a[0] + b[0]) / 2 : (a[1] + b[1]) / 2;
    return horizontal ? [a, [mid, a[1]], [mid, b[1]], b] : [a, [a[0], mid], [b[0], mid], b];
  };
  let loops = 0;
  edges.forEach((edge, i) => {
    let d, last, t = 0.72;
    if (chains[i] === null) {  // back-edge: an arc on the side, each one a little further out
      const a = pos.get(edge.source), b = pos.get(edge.target), sa = size.get(edge.source), sb = size.get(edge.target);
      // outside everything drawn in the ranks it spans, each arc a little further out
      const lo = Math.min(rank.get(edge.source), rank.get(edge.target)), hi = Math.max(rank.get(edge.source), rank.get(edge.target));
      const spanned = all.filter((id) => rank.get(id) >= lo && rank.get(id) <= hi);
      const outer = Math.max(...spanned.map((id) => (horizontal ? pos.get(id).y + size.get(id).h / 2 : pos.get(id).x + size.get(id).w / 2)));
      const side = outer + 30 + loops;
      loops += edge.label ? Math.max(24, Math.min(String(edge.label).length, 24) * 6.2 + 12) : 24;
      if (horizontal) {
        const y1 = a.y + sa.h / 2, y2 = b.y + sb.h / 2;
        last = [[a.x, y1], [a.x, side], [b.x, side], [b.x, y2]];
      } else {
        const x1 = a.x + sa.w / 2, x2 = b.x + sb.w / 2;
        last = [[x1, a.y], [side, a.y], [side, b.y], [x2, b.y]];
      }
      d = `M${last[0]} C${last[1]} ${last[2]} ${last[3]}`;
      t = 0.5;
    } else {
      const chain = chains[i];
      const points = chain.map((id, k) => (k === 0 ? exit(id) : k === chain.length - 1 ? entry(id) : [pos.get(id).x, pos.get(id).y]));
      d = `M${points[0]}`;
      const labelAt = points.length > 2 ? Math.ceil((points.length - 1) / 2) : 1;  // a long edge: its middle lane
      for (let k = 1; k < points.length; k++) {
        const piece = curve(points[k - 1], points[k]);
        d += ` C${piece[1]} ${piece[2]} ${piece[3]}`;
        if (k === labelAt) last = piece;
      }
      if (points.length > 2) t = 1;
    }
    el("path", { d, class: `edge ${edge.style || "solid"}`, "marker-end": `url(#${arrow})` }, svg);
    if (edge.label) {
      const key = edge.source + "\u0000" + edge.target;
      const nth = pairs.get(key) || 0;
      pairs.set(key, nth + 1);
      const [lx, ly] = bezier(last, t);  // near the target, where edges fanning out are apart
      const full = String(edge.label);
      const text = full.length > 24 ? full.slice(0, 23) + "…" : full;
      const g = el("g", {}, svg);
      const bgW = text.length * 6.2 + 6, y = ly - nth * 15;
      el("rect", { x: lx - bgW / 2, y: y - 8, width: bgW, height: 15, class: "edge-label-bg" }, g);
      el("text", { x: lx, y: y + 3, "text-anchor": "middle", class: "edge-label" }, g).textContent = text;
      el("title", {}, g).textContent = full;
    }
  });

  for (const id of ids) {
    const node = byId.get(id), p = pos.get(id), s = size.get(id);
    const step = node.step || id;  // a loop's check shows its loop step's state
    const terminal = node.kind === "start" || node.kind === "end";
    const classes = ["node", `kind-${node.kind}`, terminal ? "terminal" : "", status.has(step) ? `s-${status.get(step)}` : ""];
    const g = el("g", { class: classes.join(" ").trim(), transform: `translate(${p.x},${p.y})`, "data-node": id }, svg);
    shapeOf(g, node, s.w, s.h);
    const lines = String(node.label).split("\n");
    lines.forEach((line, i) => {
      const t = el("text", { x: 0, y: 4 + (i - (lines.length - 1) / 2) * 14, "text-anchor": "middle" }, g);
      t.textContent = line;
    });
    const title = el("title", {}, g);
    title.textContent = status.has(step) ? `${node.label}: ${status.get(step)}` : node.label;
  }
  return svg;
}
