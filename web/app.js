// gossip dashboard: polls state.json every 500 ms and updates the page in place.
// Plain ES2020, hand-drawn SVG, no libraries. Read-only: it only ever GETs state.json.
"use strict";
(() => {
  const POLL_MS = 500;
  const FETCH_TIMEOUT_MS = 2500;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const STATES = ["starting", "alive", "suspect", "dead", "finished"];
  // Outline colours of the components (kept away from the state fills and the byzantine red).
  const COMPONENT_COLORS = ["#7048e8", "#1098ad", "#f76707", "#be4bdb", "#364fc7", "#8d6e63",
    "#0ca678", "#e8590c", "#5f3dc4", "#495057"];
  // Phases in the order the C++ side lists them (timeline.hpp); encrypt runs beside the others.
  const PHASE_COLORS = {
    setup: "#adb5bd", compute: "#4c6ef5", compress: "#74c0fc", send: "#20c997", wait: "#fab005",
    mix: "#be4bdb", evaluate: "#fd7e14", checkpoint: "#a9e34b", monitor: "#e64980",
    finish: "#868e96", encrypt: "#495057",
  };
  const PHASE_ORDER = Object.keys(PHASE_COLORS);
  const EXTRA_COLORS = ["#15aabf", "#82c91e", "#f06595", "#7950f2", "#ff922b", "#12b886"];

  const $ = (id) => document.getElementById(id);
  const isNum = (v) => typeof v === "number" && Number.isFinite(v);

  function svg(tag, attrs, parent) {
    const el = document.createElementNS(SVG_NS, tag);
    if (attrs) for (const k in attrs) el.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(el);
    return el;
  }
  function html(tag, attrs, parent, text) {
    const el = document.createElement(tag);
    if (attrs) for (const k in attrs) el.setAttribute(k, attrs[k]);
    if (text !== undefined) el.textContent = text;
    if (parent) parent.appendChild(el);
    return el;
  }
  function setText(el, text) {
    if (el && el.textContent !== text) el.textContent = text;
  }
  function setAttr(el, name, value) {
    if (el.getAttribute(name) !== value) el.setAttribute(name, value);
  }

  // ---------- formatting ----------
  function fmtDuration(s) {
    if (!isNum(s)) return "\u2013";
    if (s < 60) return s.toFixed(1) + " s";
    const t = Math.round(s);
    if (t < 3600) return Math.floor(t / 60) + "m " + String(t % 60).padStart(2, "0") + "s";
    return Math.floor(t / 3600) + "h " + String(Math.floor(t / 60) % 60).padStart(2, "0") + "m";
  }
  function fmtPct(v) { return isNum(v) ? (v * 100).toFixed(1) + "%" : "\u2013"; }
  function fmtNum(v) {
    if (!isNum(v)) return "\u2013";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    if (a >= 100) return v.toFixed(0);
    return String(Number(v.toPrecision(3)));
  }
  function fmtSci(v) { return isNum(v) ? v.toExponential(2) : "\u2013"; }
  function fmtBytes(b) {
    if (!isNum(b)) return "\u2013";
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (Math.abs(b) >= 1000 && i < units.length - 1) { b /= 1000; i++; }
    return (i === 0 ? b.toFixed(0) : b.toFixed(b < 10 ? 2 : 1)) + " " + units[i];
  }
  function fmtRate(bps) { return isNum(bps) ? (bps / 1000).toFixed(bps < 10000 ? 2 : 1) + " KB/s" : "\u2013"; }
  // "0 1 2 3", or with runs folded ("0-15 17 20-63") when the list is long.
  function fmtPeers(list) {
    if (list.length <= 16) return list.join(" ");
    const out = [];
    for (let i = 0; i < list.length;) {
      let j = i;
      while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
      if (j - i >= 2) out.push(list[i] + "\u2013" + list[j]); else for (let k = i; k <= j; k++) out.push(String(list[k]));
      i = j + 1;
    }
    return out.join(" ");
  }
  const componentColor = (i) => COMPONENT_COLORS[i % COMPONENT_COLORS.length];

  // ---------- header ----------
  function renderHeader(s) {
    setText($("source"), s.source || "gossip");
    setText($("out"), s.out || "\u2013");
    $("out").title = s.out || "";
    setText($("topology"), s.topology || "\u2013");
    $("topology").title = s.topology || "";
    setText($("algorithm"), s.algorithm || "\u2013");
    setText($("npeers"), isNum(s.n) ? String(s.n) : "\u2013");
    $("finished").hidden = !s.finished;

    const bar = $("progress"), round = isNum(s.round) ? s.round : null;
    const rounds = isNum(s.rounds) && s.rounds > 0 ? s.rounds : null;
    let label;
    if (rounds) {
      const frac = s.finished ? 1 : Math.max(0, Math.min(1, (round || 0) / rounds));
      $("progress-fill").style.width = (frac * 100).toFixed(2) + "%";
      bar.setAttribute("aria-valuenow", (frac * 100).toFixed(0));
      label = "round " + (round === null ? "\u2013" : round) + " / " + rounds + "  (" + (frac * 100).toFixed(1) + "%)";
    } else {
      $("progress-fill").style.width = s.finished ? "100%" : "0";
      bar.removeAttribute("aria-valuenow");
      label = "round " + (round === null ? "\u2013" : round) + " / ?";
    }
    bar.classList.toggle("unknown", !rounds && !s.finished);
    bar.classList.toggle("complete", !!s.finished);
    setText($("progress-label"), label);
    setText($("elapsed"), fmtDuration(s.elapsed_s));
    setText($("eta"), s.finished ? "done" : fmtDuration(s.eta_s));

    const comps = Array.isArray(s.components) ? s.components : [];
    const partitioned = s.connected === false || comps.length > 1;
    $("partition").hidden = !partitioned;
    if (partitioned) {
      const k = comps.length;
      setText($("partition-text"), k > 1 ? "Live graph partitioned into " + k + " components" : "Live graph disconnected");
    }
    document.title = (s.finished ? "\u2713 " : "") + "gossip " + (round === null ? "" : "r" + round + " ") + "\u2013 " + (s.out || "dashboard");
  }

  // ---------- topology graph ----------
  const G = { key: null, nodes: new Map(), links: new Map(), r: 10, maxW: 8, componentsKey: null };
  const SIZE = 520, C = SIZE / 2;

  function buildGraph(root, n, links) {
    root.textContent = "";
    G.nodes.clear();
    G.links.clear();
    const outside = n > 24;   // small nodes: the label goes outside the circle
    const R = outside ? C - 34 : C - 36;
    const r = Math.max(6, Math.min(22, (Math.PI * R / Math.max(n, 1)) * 0.55));
    G.r = r;
    // Links are 1 to 8 px wide; on a crowded circle the widest is thinner.
    G.maxW = n <= 24 ? 8 : Math.max(3, 8 * 24 / n);
    const pos = [];
    for (let i = 0; i < n; i++) {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / n;   // id 0 at the top, clockwise
      pos.push({ x: C + R * Math.cos(a), y: C + R * Math.sin(a), a });
    }
    const gl = svg("g", { class: "links" }, root);
    const gn = svg("g", { class: "nodes" }, root);
    for (const l of links) {
      const p = pos[l.a], q = pos[l.b];
      if (!p || !q) continue;
      const g = svg("g", { class: "link", "data-a": l.a, "data-b": l.b, "data-up": "true" }, gl);
      const c = { x1: p.x.toFixed(1), y1: p.y.toFixed(1), x2: q.x.toFixed(1), y2: q.y.toFixed(1) };
      svg("line", Object.assign({ class: "hit" }, c), g);
      const vis = svg("line", Object.assign({ class: "vis", "stroke-width": 1 }, c), g);
      const title = svg("title", null, g);
      G.links.set(l.a + "-" + l.b, { g, vis, title });
    }
    const font = outside ? 10 : Math.max(10, Math.min(15, r * 0.75));
    for (let i = 0; i < n; i++) {
      const { x, y, a } = pos[i];
      const g = svg("g", { class: "peer", "data-peer": i, "data-state": "starting", "data-component": "",
        transform: "translate(" + x.toFixed(1) + "," + y.toFixed(1) + ")" }, gn);
      const byz = svg("circle", { class: "byz", r: (r + Math.max(4.5, r * 0.4)).toFixed(1),
        "stroke-width": Math.max(1.8, r * 0.13).toFixed(1) }, g);
      const comp = svg("circle", { class: "comp", r: (r + Math.max(2, r * 0.17)).toFixed(1),
        "stroke-width": Math.max(1.8, r * 0.16).toFixed(1), stroke: "none" }, g);
      svg("circle", { class: "body", r: r.toFixed(1) }, g);
      const d = (r * 0.62).toFixed(1);
      svg("path", { class: "cross", d: "M-" + d + ",-" + d + "L" + d + "," + d + "M" + d + ",-" + d + "L-" + d + "," + d }, g);
      const label = svg("text", { class: "label" + (outside ? " out" : ""), "font-size": font.toFixed(1) }, g);
      if (outside) {
        const off = r + 11;
        label.setAttribute("x", (off * Math.cos(a)).toFixed(1));
        label.setAttribute("y", (off * Math.sin(a)).toFixed(1));
      }
      label.textContent = String(i);
      const title = svg("title", null, g);
      G.nodes.set(i, { g, comp, byz, title });
    }
  }

  function linkWidth(bps) {
    // Log scale: 100 B/s or less is 1 px, 100 MB/s or more is G.maxW (8 px up to 24 peers).
    if (!isNum(bps) || bps <= 100) return 1;
    return 1 + (G.maxW - 1) * Math.min(1, (Math.log10(bps) - 2) / 6);
  }

  function renderGraph(s) {
    const peers = Array.isArray(s.peers) ? s.peers : [];
    const links = Array.isArray(s.links) ? s.links : [];
    let n = isNum(s.n) ? s.n : 0;
    for (const p of peers) if (isNum(p.id)) n = Math.max(n, p.id + 1);
    const key = n + "|" + links.map((l) => l.a + "-" + l.b).join(",");
    const root = $("graph");
    if (key !== G.key) { buildGraph(root, n, links); G.key = key; }

    const comps = Array.isArray(s.components) ? s.components : [];
    const several = comps.length > 1;
    const byId = new Map();
    for (const p of peers) byId.set(p.id, p);
    for (const [id, node] of G.nodes) {
      const p = byId.get(id) || { id, state: "starting" };
      const state = STATES.includes(p.state) ? p.state : "starting";
      const comp = isNum(p.component) ? p.component : null;
      setAttr(node.g, "data-state", state);
      setAttr(node.g, "data-component", comp === null ? "" : String(comp));
      node.g.classList.toggle("byzantine", !!p.byzantine);
      node.g.classList.toggle("cut", !!p.cut);
      setAttr(node.comp, "stroke", several && comp !== null && state !== "dead" ? componentColor(comp) : "none");
      const lines = ["peer " + id + ": " + state];
      if (comp !== null) lines.push("component " + (comp + 1));
      if (p.byzantine) lines.push("suspected of lying by a neighbour");
      if (p.cut) lines.push("cut by a neighbour for lying");
      if (isNum(p.round)) lines.push("round " + p.round);
      if (isNum(p.accuracy)) lines.push("accuracy " + fmtPct(p.accuracy));
      if (isNum(p.loss)) lines.push("loss " + fmtNum(p.loss));
      if (isNum(p.bytes_sent)) lines.push("sent " + fmtBytes(p.bytes_sent));
      if (p.reachability) lines.push(p.reachability);
      setText(node.title, lines.join("\n"));
    }
    for (const l of links) {
      const el = G.links.get(l.a + "-" + l.b);
      if (!el) continue;
      const up = l.up !== false;
      const never = l.state === "never_formed";
      setAttr(el.g, "data-up", up ? "true" : "false");
      setAttr(el.g, "data-never", never ? "true" : "false");
      const path = typeof l.path === "string" ? l.path : "";
      setAttr(el.g, "data-relayed", path.startsWith("relayed") ? "true" : "false");
      setAttr(el.vis, "stroke-width", linkWidth(l.bytes_per_s).toFixed(2));
      setText(el.title, l.a + " \u2194 " + l.b + ": " + fmtRate(l.bytes_per_s) +
        (isNum(l.weight) ? ", weight " + fmtNum(l.weight) : "") +
        (up ? "" : never ? " (never formed)" : l.state === "lost" ? " (lost)" : " (down)") +
        (path ? "\n" + path : ""));
    }

    const live = peers.filter((p) => p.state !== "dead").length;
    setText($("graph-sub"), n + " peers, " + links.length + " links" + (peers.length ? ", " + live + " live" : ""));

    // Components legend: one .component per component of the live graph.
    const box = $("components");
    const ckey = JSON.stringify(comps);
    if (G.componentsKey !== ckey) {
      G.componentsKey = ckey;
      box.textContent = "";
      comps.forEach((list, i) => {
        const ids = (Array.isArray(list) ? list : []).slice().sort((a, b) => a - b);
        const item = html("span", { class: "component" + (several ? "" : " single"), "data-peers": ids.join(" "),
          "data-index": i }, box);
        const sw = html("span", { class: "swatch" }, item);
        if (several) sw.style.borderColor = componentColor(i);
        html("b", null, item, several ? "component " + (i + 1) + ":" : "connected:");
        html("span", null, item, fmtPeers(ids));
      });
    }
  }

  function buildStateLegend() {
    const box = $("state-legend");
    for (const st of STATES) {
      const it = html("span", { class: "item" }, box);
      html("span", { class: "swatch", "data-state": st }, it);
      it.appendChild(document.createTextNode(st));
    }
    let it = html("span", { class: "item" }, box);
    html("span", { class: "swatch ring" }, it);
    it.appendChild(document.createTextNode("byzantine"));
    it = html("span", { class: "item" }, box);
    html("span", { class: "swatch ring dashed" }, it);
    it.appendChild(document.createTextNode("cut"));
    it = html("span", { class: "item", title: "line width: log of bytes/s, both directions" }, box);
    html("span", { class: "swatch line" }, it);
    it.appendChild(document.createTextNode("link (width \u221d log rate)"));
    it = html("span", { class: "item" }, box);
    html("span", { class: "swatch line dashed" }, it);
    it.appendChild(document.createTextNode("down"));
    it = html("span", { class: "item" }, box);
    html("span", { class: "swatch line dotted" }, it);
    it.appendChild(document.createTextNode("never formed"));
  }

  // ---------- charts ----------
  let xMode = "round";
  const chartKeys = new Map();

  function niceStep(span, count) {
    const raw = span / Math.max(1, count);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }
  function linTicks(lo, hi, step) {
    const out = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }
  const SUPERSCRIPT = { "-": "\u207b", 0: "\u2070", 1: "\u00b9", 2: "\u00b2", 3: "\u00b3", 4: "\u2074", 5: "\u2075",
    6: "\u2076", 7: "\u2077", 8: "\u2078", 9: "\u2079" };
  const pow10Label = (e) => e === 0 ? "1" : e === 1 ? "10" : "10" + String(e).split("").map((c) => SUPERSCRIPT[c]).join("");

  function textWidth(el, perChar) {
    let w = 0;
    try { w = el.getComputedTextLength(); } catch (err) { w = 0; }
    return w > 0 ? w : el.textContent.length * perChar;
  }

  // spec: { lines: [{label, color, pts: [[x, y]], value, width, dash}], band: {label, color, pts: [[x, lo, hi]]},
  //         log: bool, yFormat: fn, yClamp: [lo, hi] }
  function drawChart(root, spec) {
    const W = Math.max(200, root.clientWidth || 500), H = Math.max(100, root.clientHeight || 150);
    const key = W + "x" + H + "|" + xMode + "|" + spec.key;
    if (chartKeys.get(root.id) === key) return;
    chartKeys.set(root.id, key);
    root.textContent = "";
    root.setAttribute("viewBox", "0 0 " + W + " " + H);
    const m = { l: 46, r: 12, t: 20, b: 22 };
    const pw = W - m.l - m.r, ph = H - m.t - m.b;
    const ty = (v) => spec.log ? Math.log10(v) : v;

    let xs = [], ys = [];
    for (const s of spec.lines) for (const [x, y] of s.pts) { xs.push(x); ys.push(ty(y)); }
    if (spec.band) for (const [x, lo, hi] of spec.band.pts) { xs.push(x); ys.push(ty(lo), ty(hi)); }
    if (!xs.length) {
      svg("rect", { x: m.l, y: m.t, width: pw, height: ph, fill: "#fafbfd", stroke: "#edf0f5" }, root);
      svg("text", { class: "empty", x: m.l + pw / 2, y: m.t + ph / 2 }, root).textContent = "no data yet";
      return;
    }
    let x0 = Math.min(...xs), x1 = Math.max(...xs);
    if (x1 - x0 < 1e-12) { x0 -= 1; x1 += 1; }
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    let yTicks;
    if (spec.log) {
      y0 = Math.floor(y0 + 1e-9); y1 = Math.ceil(y1 - 1e-9);
      if (y1 <= y0) y1 = y0 + 1;
      const every = Math.ceil((y1 - y0) / 5);
      yTicks = [];
      for (let e = y0; e <= y1; e += every) yTicks.push(e);
    } else {
      if (y1 - y0 < 1e-12) { const d = Math.abs(y0) * 0.1 || 0.1; y0 -= d; y1 += d; }
      const st = niceStep(y1 - y0, 4);
      y0 = Math.floor(y0 / st + 1e-9) * st; y1 = Math.ceil(y1 / st - 1e-9) * st;
      if (spec.yClamp) { y0 = Math.max(spec.yClamp[0], y0); y1 = Math.min(spec.yClamp[1], y1); }
      yTicks = linTicks(y0, y1, st);
    }
    const X = (x) => m.l + ((x - x0) / (x1 - x0)) * pw;
    const Y = (y) => m.t + ph - ((ty(y) - y0) / (y1 - y0)) * ph;
    const YT = (t) => m.t + ph - ((t - y0) / (y1 - y0)) * ph;

    // grid and y ticks
    for (const t of yTicks) {
      const y = YT(t).toFixed(1);
      svg("line", { class: "grid-line", x1: m.l, x2: m.l + pw, y1: y, y2: y }, root);
      svg("text", { class: "tick", x: m.l - 6, y, "text-anchor": "end", "dominant-baseline": "middle" }, root)
        .textContent = spec.log ? pow10Label(t) : spec.yFormat(t);
    }
    // x ticks
    const xst = niceStep(x1 - x0, Math.max(2, Math.floor(pw / 80)));
    for (const t of linTicks(x0, x1, xst)) {
      const x = X(t).toFixed(1);
      svg("line", { class: "axis", x1: x, x2: x, y1: m.t + ph, y2: m.t + ph + 4 }, root);
      svg("text", { class: "tick", x, y: m.t + ph + 15, "text-anchor": "middle" }, root)
        .textContent = xMode === "seconds" ? String(Number(t.toPrecision(6))) : String(Math.round(t));
    }
    svg("line", { class: "axis", x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph }, root);
    svg("line", { class: "axis", x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph }, root);
    svg("text", { class: "axis-label", x: m.l + pw, y: m.t - 6, "text-anchor": "end" }, root)
      .textContent = "x: " + (xMode === "seconds" ? "seconds" : "round");

    const clipId = "clip-" + root.id;
    const clip = svg("clipPath", { id: clipId }, svg("defs", null, root));
    svg("rect", { x: m.l - 2, y: m.t - 2, width: pw + 4, height: ph + 4 }, clip);
    const plot = svg("g", { "clip-path": "url(#" + clipId + ")" }, root);

    if (spec.band && spec.band.pts.length > 1) {
      const top = spec.band.pts.map(([x, , hi]) => X(x).toFixed(1) + "," + Y(hi).toFixed(1));
      const bot = spec.band.pts.slice().reverse().map(([x, lo]) => X(x).toFixed(1) + "," + Y(lo).toFixed(1));
      svg("polygon", { points: top.concat(bot).join(" "), fill: spec.band.color, opacity: 0.16 }, plot);
    }
    for (const s of spec.lines) {
      if (!s.pts.length) continue;
      const d = s.pts.map(([x, y], i) => (i ? "L" : "M") + X(x).toFixed(1) + "," + Y(y).toFixed(1)).join("");
      svg("path", { class: "series", d, stroke: s.color, "stroke-width": s.width || 2,
        "stroke-dasharray": s.dash || "none" }, plot);
      const [lx, ly] = s.pts[s.pts.length - 1];
      svg("circle", { cx: X(lx).toFixed(1), cy: Y(ly).toFixed(1), r: 3, fill: s.color }, plot);
    }

    // legend along the top
    let lx = m.l + 2;
    const items = spec.lines.map((s) => ({ label: s.label, color: s.color, value: s.value, dash: s.dash }));
    if (spec.band) items.push({ label: spec.band.label, color: spec.band.color, band: true });
    for (const it of items) {
      if (it.band) svg("rect", { x: lx, y: 4, width: 14, height: 9, fill: it.color, opacity: 0.25, rx: 2 }, root);
      else svg("line", { x1: lx, x2: lx + 14, y1: 8.5, y2: 8.5, stroke: it.color, "stroke-width": 2.5,
        "stroke-dasharray": it.dash || "none" }, root);
      lx += 18;
      const t = svg("text", { class: "legend-text", x: lx, y: 12.5 }, root);
      t.textContent = it.label;
      lx += textWidth(t, 6) + 5;
      if (it.value) {
        const v = svg("text", { class: "legend-value", x: lx, y: 12.5 }, root);
        v.textContent = it.value;
        lx += textWidth(v, 6.2) + 5;
      }
      lx += 12;
    }
  }

  function renderCharts(s) {
    const series = Array.isArray(s.series) ? s.series : [];
    const xOf = (e) => xMode === "seconds" ? e.seconds : e.round;
    const pts = (field, ok) => {
      const out = [];
      for (const e of series) {
        const x = xOf(e), y = e[field];
        if (isNum(x) && isNum(y) && (!ok || ok(y))) out.push([x, y]);
      }
      return out;
    };
    const last = (p) => p.length ? p[p.length - 1][1] : null;
    const n = series.length;
    const tail = n ? JSON.stringify(series[n - 1]) + JSON.stringify(series[0]) : "";
    const key = n + "|" + tail;

    const acc = pts("accuracy"), accMin = pts("accuracy_min");
    const band = [];
    for (const e of series) {
      const x = xOf(e);
      if (isNum(x) && isNum(e.accuracy_min) && isNum(e.accuracy_max)) band.push([x, e.accuracy_min, e.accuracy_max]);
    }
    drawChart($("chart-accuracy"), {
      key,
      lines: [
        { label: "average model", color: "#2f6fde", pts: acc, value: fmtPct(last(acc)) },
        { label: "lowest peer", color: "#e8590c", pts: accMin, value: fmtPct(last(accMin)), width: 1.6, dash: "5 3" },
      ],
      band: band.length ? { label: "peer range", color: "#e8590c", pts: band } : null,
      yFormat: (v) => (v * 100).toFixed(0) + "%",
      yClamp: [0, 1],
    });
    const loss = pts("loss");
    drawChart($("chart-loss"), {
      key,
      lines: [{ label: "loss", color: "#c2255c", pts: loss, value: fmtNum(last(loss)) }],
      yFormat: fmtNum,
    });
    const cd = pts("consensus_distance", (v) => v > 0);
    drawChart($("chart-consensus"), {
      key,
      lines: [{ label: "consensus distance", color: "#0ca678", pts: cd, value: fmtSci(last(cd)) }],
      log: true,
    });
  }

  function setupToggle() {
    for (const b of $("x-axis").querySelectorAll("button")) {
      b.addEventListener("click", () => {
        xMode = b.dataset.x === "seconds" ? "seconds" : "round";
        for (const o of $("x-axis").querySelectorAll("button")) o.classList.toggle("on", o === b);
        if (lastState) renderCharts(lastState);
      });
    }
    let pending = 0;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(() => { if (lastState) renderCharts(lastState); }, 150);
    });
  }

  // ---------- events ----------
  let eventsKey = null, newestSeen = null;
  function eventClass(ev) {
    if (ev === "dead") return "ev-dead";
    if (ev === "partition") return "ev-partition";
    if (ev === "healed") return "ev-healed";
    if (ev.startsWith("byzantine_")) return "ev-byzantine";
    if (ev === "refused_params") return "ev-refused";
    if (ev === "suspect") return "ev-suspect";
    if (ev === "rejoin" || ev === "alive") return "ev-rejoin";
    return "ev-other";
  }
  const eventId = (e) => e ? [e.seconds, e.round, e.peer, e.event, e.subject, e.text].join("|") : "";

  function renderEvents(s) {
    const events = Array.isArray(s.events) ? s.events : [];
    const key = events.length + "|" + eventId(events[0]) + "|" + eventId(events[events.length - 1]);
    if (key === eventsKey) return;
    const firstRender = eventsKey === null;
    eventsKey = key;
    const body = $("events").tBodies[0];
    const frag = document.createDocumentFragment();
    const fresh = [];
    let reachedOld = firstRender || newestSeen === null;
    for (const e of events) {
      const ev = String(e.event || "");
      const id = eventId(e);
      if (!reachedOld && id === newestSeen) reachedOld = true;
      const tr = html("tr", { class: eventClass(ev), "data-event": ev }, frag);
      html("td", { class: "num" }, tr, isNum(e.seconds) ? e.seconds.toFixed(1) : "\u2013");
      html("td", { class: "num" }, tr, isNum(e.round) ? String(e.round) : "\u2013");
      html("td", null, tr, e.peer === -1 ? "launcher" : isNum(e.peer) ? String(e.peer) : "\u2013");
      html("td", { class: "event" }, tr, ev);
      html("td", { class: "text" }, tr, e.text || "");
      if (!reachedOld) fresh.push(tr);
    }
    if (!events.length) {
      const tr = html("tr", { class: "none" }, frag);
      html("td", { colspan: "5" }, tr, "no events yet");
    }
    body.replaceChildren(frag);
    newestSeen = eventId(events[0]) || newestSeen;
    if (fresh.length && !firstRender) {
      for (const tr of fresh) tr.classList.add("fresh");
      requestAnimationFrame(() => setTimeout(() => { for (const tr of fresh) tr.classList.remove("fresh"); }, 60));
    }
    setText($("events-sub"), events.length ? events.length + (events.length >= 200 ? "+ (newest 200)" : "") + ", newest first" : "");
  }

  // ---------- phases ----------
  const P = { key: null, rows: new Map(), extra: new Map() };
  function phaseColor(name) {
    if (PHASE_COLORS[name]) return PHASE_COLORS[name];
    if (!P.extra.has(name)) P.extra.set(name, EXTRA_COLORS[P.extra.size % EXTRA_COLORS.length]);
    return P.extra.get(name);
  }
  function renderPhases(s) {
    const peers = (Array.isArray(s.peers) ? s.peers : []).slice().sort((a, b) => a.id - b.id);
    const names = new Set();
    for (const p of peers) if (p.phases) for (const k in p.phases) if (isNum(p.phases[k])) names.add(k);
    const ordered = PHASE_ORDER.filter((k) => names.has(k)).concat([...names].filter((k) => !PHASE_COLORS[k]).sort());
    const wall = ordered.filter((k) => k !== "encrypt");
    const box = $("phases");
    const key = peers.map((p) => p.id).join(",") + "|" + ordered.join(",");
    if (key !== P.key) {
      P.key = key;
      P.rows.clear();
      box.textContent = "";
      if (!ordered.length) { html("div", { class: "phases-empty" }, box, "no phase timings yet"); return; }
      const legend = html("div", { class: "legend" }, box);
      for (const k of ordered) {
        const it = html("span", { class: "item" }, legend);
        const sw = html("span", { class: "swatch bar" }, it);
        sw.style.background = phaseColor(k);
        if (k === "encrypt") { sw.style.height = "4px"; it.title = "TLS sealing and opening, on a thread of its own: beside the wall time"; }
        it.appendChild(document.createTextNode(k));
      }
      const rows = html("div", { class: "rows" }, box);
      for (const p of peers) {
        const row = html("div", { class: "phase-row", "data-peer": p.id }, rows);
        html("span", { class: "who" }, row, String(p.id));
        const track = html("div", { class: "track" }, row);
        const bar = html("div", { class: "bar" }, track);
        const segs = new Map();
        for (const k of wall) {
          const seg = html("span", { "data-phase": k }, bar);
          seg.style.background = phaseColor(k);
          seg.style.width = "0";
          segs.set(k, seg);
        }
        const enc = html("div", { class: "enc" }, track);
        const total = html("span", { class: "total" }, row);
        P.rows.set(p.id, { row, bar, segs, enc, total });
      }
    }
    if (!ordered.length) return;
    const sumOf = (p) => wall.reduce((a, k) => a + (p.phases && isNum(p.phases[k]) ? p.phases[k] : 0), 0);
    let maxTotal = 0;
    for (const p of peers) maxTotal = Math.max(maxTotal, sumOf(p));
    for (const p of peers) {
      const r = P.rows.get(p.id);
      if (!r) continue;
      const ph = p.phases || {};
      const total = sumOf(p);
      // The bar's length is the peer's wall time relative to the slowest peer's.
      r.bar.style.width = maxTotal > 0 ? (100 * total / maxTotal).toFixed(2) + "%" : "0";
      for (const [k, seg] of r.segs) {
        const v = isNum(ph[k]) ? ph[k] : 0;
        seg.style.width = total > 0 ? (100 * v / total).toFixed(3) + "%" : "0";
        seg.title = k + ": " + v.toFixed(3) + " s" + (total > 0 ? " (" + (100 * v / total).toFixed(1) + "%)" : "");
      }
      const enc = isNum(ph.encrypt) ? ph.encrypt : 0;
      r.enc.hidden = !(enc > 0);
      r.enc.style.width = maxTotal > 0 ? Math.min(100, 100 * enc / maxTotal).toFixed(2) + "%" : "0";
      r.enc.title = "encrypt: " + enc.toFixed(3) + " s (beside the wall time)";
      setText(r.total, total > 0 ? fmtDuration(total) : "\u2013");
      r.row.title = "peer " + p.id + ": " + fmtDuration(total) + " of wall time";
    }
  }

  // ---------- peer table ----------
  const T = { key: null, rows: new Map() };
  function renderPeerTable(s) {
    const peers = (Array.isArray(s.peers) ? s.peers : []).slice().sort((a, b) => a.id - b.id);
    const comps = Array.isArray(s.components) ? s.components : [];
    const body = $("peer-table").tBodies[0];
    const key = peers.map((p) => p.id).join(",");
    if (key !== T.key) {
      T.key = key;
      T.rows.clear();
      body.textContent = "";
      for (const p of peers) {
        const tr = html("tr", { "data-peer": p.id }, body);
        const cells = [];
        for (let i = 0; i < 7; i++) cells.push(html("td", i >= 3 ? { class: "num" } : null, tr));
        cells[0].textContent = String(p.id);
        const dot = html("span", { class: "dot" }, cells[1]);
        const st = html("span", null, cells[1]);
        const flags = html("span", null, cells[1]);
        T.rows.set(p.id, { tr, cells, dot, st, flags, flagKey: "" });
      }
    }
    for (const p of peers) {
      const r = T.rows.get(p.id);
      const state = STATES.includes(p.state) ? p.state : "starting";
      setAttr(r.dot, "data-state", state);
      setAttr(r.tr, "class", state);
      setText(r.st, state);
      const flagKey = (p.byzantine ? "b" : "") + (p.cut ? "c" : "");
      if (flagKey !== r.flagKey) {
        r.flagKey = flagKey;
        r.flags.textContent = "";
        if (p.byzantine) html("span", { class: "flag", title: "a neighbour suspects it of lying" }, r.flags, "byzantine");
        if (p.cut) html("span", { class: "flag", title: "a neighbour has cut it for lying" }, r.flags, "cut");
      }
      const comp = isNum(p.component) ? p.component : null;
      setText(r.cells[2], comp === null ? "\u2013" : comps.length > 1 ? String(comp + 1) : "connected");
      r.cells[2].style.color = comp !== null && comps.length > 1 ? componentColor(comp) : "";
      setText(r.cells[3], isNum(p.round) ? String(p.round) : "\u2013");
      setText(r.cells[4], fmtPct(p.accuracy));
      setText(r.cells[5], fmtNum(p.loss));
      setText(r.cells[6], fmtBytes(p.bytes_sent));
    }
  }

  // ---------- polling ----------
  let lastState = null, updates = 0, lostSince = null;

  function render(s) {
    const parts = [renderHeader, renderGraph, renderCharts, renderEvents, renderPhases, renderPeerTable];
    for (const f of parts) {
      try { f(s); } catch (err) { console.error("dashboard: " + f.name + " failed", err); }
    }
  }

  function contact(ok, why) {
    if (ok) {
      lostSince = null;
      $("lost").hidden = true;
      document.body.classList.remove("stale");
      return;
    }
    if (lostSince === null) lostSince = Date.now();
    $("lost").hidden = false;
    document.body.classList.add("stale");
    const secs = Math.round((Date.now() - lostSince) / 1000);
    setText($("lost-detail"), "Retrying every " + POLL_MS / 1000 + " s" + (secs > 0 ? " (for " + secs + " s)" : "") +
      (why ? " \u2013 " + why : "") + (lastState ? "; showing the last state received." : "."));
  }

  async function poll() {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
    let state = null;
    try {
      const res = await fetch("state.json", { cache: "no-store", signal: ctl.signal });
      if (!res.ok) throw new Error("HTTP " + res.status);
      state = await res.json();
      if (!state || typeof state !== "object") throw new Error("not a JSON object");
    } catch (err) {
      contact(false, err && err.name === "AbortError" ? "timed out" : err && err.message);
    } finally {
      clearTimeout(timer);
    }
    if (state) {
      contact(true);
      lastState = state;
      render(state);
      updates++;
      document.body.dataset.round = isNum(state.round) ? String(state.round) : "";
      document.body.dataset.updates = String(updates);
    }
    setTimeout(poll, POLL_MS);
  }

  buildStateLegend();
  setupToggle();
  poll();
})();
