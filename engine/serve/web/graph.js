// Draw a flow graph ({direction, nodes, edges, groups} from GET /flows/{name}) as SVG.
// A small layered layout: cycles are broken by a depth-first search, nodes are ranked by the
// longest path from the entry, ordered within a rank by the barycentre of their neighbours,
// and edges are drawn as curves (back-edges loop around on the side).

const SVG = "http://www.w3.org/2000/svg";
const CHAR_W = 7, NODE_H = 32, PAD_X = 14, GAP_MAIN = 56, GAP_CROSS = 26, MARGIN = 24;

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
  const neighbours = (id, up) => edges.filter((e) => (up ? e.target === id : e.source === id))
    .map((e) => (up ? e.source : e.target));
  const position = new Map();
  const index = () => layers.forEach((layer) => layer.forEach((id, i) => position.set(id, i)));
  index();
  for (let sweep = 0; sweep < 4; sweep++) {
    const up = sweep % 2 === 0;
    const range = up ? layers.keys() : [...layers.keys()].reverse();
    for (const r of range) {
      const layer = layers[r] || [];
      const score = new Map(layer.map((id) => {
        const ns = neighbours(id, up).filter((n) => position.has(n) && rank.get(n) !== r);
        return [id, ns.length ? ns.reduce((s, n) => s + position.get(n), 0) / ns.length : position.get(id)];
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
  const nodes = graph.nodes || [], edges = graph.edges || [];
  const ids = nodes.map((n) => n.id);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const horizontal = graph.direction === "LR" || graph.direction === "RL";
  const { rank, back } = rankNodes(ids, edges);
  const layers = orderRanks(ids, edges, rank);
  const size = new Map(nodes.map((n) => {
    const lines = String(n.label).split("\n");
    return [n.id, { w: Math.max(...lines.map((l) => l.length)) * CHAR_W + 2 * PAD_X, h: NODE_H + (lines.length - 1) * 14 }];
  }));
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
  const loopRoom = back.size ? 60 : 0;
  const width = (horizontal ? main : widest + 2 * MARGIN) + (horizontal ? 0 : loopRoom);
  const height = (horizontal ? widest + 2 * MARGIN + loopRoom : main);
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const defs = el("defs", {}, svg);
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8b93a7" }, marker);

  for (const group of graph.groups || []) {  // dashed boxes behind their member nodes
    const members = nodes.filter((n) => n.group === group.id && pos.has(n.id));
    if (!members.length) continue;
    const xs = members.flatMap((n) => [pos.get(n.id).x - size.get(n.id).w / 2, pos.get(n.id).x + size.get(n.id).w / 2]);
    const ys = members.flatMap((n) => [pos.get(n.id).y - size.get(n.id).h / 2, pos.get(n.id).y + size.get(n.id).h / 2]);
    const g = el("g", { class: "group" }, svg);
    const x = Math.min(...xs) - 10, y = Math.min(...ys) - 18;
    el("rect", { x, y, width: Math.max(...xs) - x + 10, height: Math.max(...ys) - y + 10, rx: 6 }, g);
    el("text", { x: x + 6, y: y + 12 }, g).textContent = group.label;
  }

  for (const edge of edges) {
    const a = pos.get(edge.source), b = pos.get(edge.target);
    if (!a || !b) continue;
    const sa = size.get(edge.source), sb = size.get(edge.target);
    const isBack = back.has(edge.source + "\u0000" + edge.target) || edge.source === edge.target;
    let d, lx, ly;
    if (!horizontal) {
      if (isBack) {
        const x1 = a.x + sa.w / 2, x2 = b.x + sb.w / 2, side = Math.max(x1, x2) + 40;
        d = `M${x1},${a.y} C${side},${a.y} ${side},${b.y} ${x2},${b.y}`; lx = side - 10; ly = (a.y + b.y) / 2;
      } else {
        const y1 = a.y + sa.h / 2, y2 = b.y - sb.h / 2, mid = (y1 + y2) / 2;
        d = `M${a.x},${y1} C${a.x},${mid} ${b.x},${mid} ${b.x},${y2}`; lx = (a.x + b.x) / 2; ly = mid;
      }
    } else if (isBack) {
      const y1 = a.y + sa.h / 2, y2 = b.y + sb.h / 2, side = Math.max(y1, y2) + 40;
      d = `M${a.x},${y1} C${a.x},${side} ${b.x},${side} ${b.x},${y2}`; lx = (a.x + b.x) / 2; ly = side - 8;
    } else {
      const x1 = a.x + sa.w / 2, x2 = b.x - sb.w / 2, mid = (x1 + x2) / 2;
      d = `M${x1},${a.y} C${mid},${a.y} ${mid},${b.y} ${x2},${b.y}`; lx = mid; ly = (a.y + b.y) / 2;
    }
    el("path", { d, class: `edge ${edge.style || "solid"}`, "marker-end": "url(#arrow)" }, svg);
    if (edge.label) {
      const bgW = String(edge.label).length * 6.2 + 6;
      el("rect", { x: lx - bgW / 2, y: ly - 8, width: bgW, height: 15, class: "edge-label-bg" }, svg);
      const t = el("text", { x: lx, y: ly + 3, "text-anchor": "middle", class: "edge-label" }, svg);
      t.textContent = edge.label;
    }
  }

  for (const id of ids) {
    const node = byId.get(id), p = pos.get(id), s = size.get(id);
    const terminal = id === "__start__" || id === "__end__" || node.label === "start" || node.label === "end";
    const classes = ["node", terminal ? "terminal" : "", status.has(id) ? `s-${status.get(id)}` : ""];
    const g = el("g", { class: classes.join(" ").trim(), transform: `translate(${p.x},${p.y})`, "data-node": id }, svg);
    shapeOf(g, node, s.w, s.h);
    const lines = String(node.label).split("\n");
    lines.forEach((line, i) => {
      const t = el("text", { x: 0, y: 4 + (i - (lines.length - 1) / 2) * 14, "text-anchor": "middle" }, g);
      t.textContent = line;
    });
    const title = el("title", {}, g);
    title.textContent = status.has(id) ? `${node.label}: ${status.get(id)}` : node.label;
  }
  return svg;
}
