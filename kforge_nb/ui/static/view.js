// src/dom.ts
function fill(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === void 0 || value === false) {
      continue;
    }
    node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === void 0 || child === false) {
      continue;
    }
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}
function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}
var SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}
function replace(node, ...children) {
  node.textContent = "";
  fill(node, void 0, children);
}
function badge(state) {
  return el("span", { class: "kforge-badge", "data-state": state }, state);
}
function muted(text) {
  return el("div", { class: "kforge-muted" }, text);
}
function table(header, rows, attrs) {
  return el(
    "table",
    { class: "kforge-table", ...attrs },
    el("thead", void 0, el("tr", void 0, ...header.map((h) => el("th", void 0, h)))),
    el("tbody", void 0, ...rows.map((cells) => el("tr", void 0, ...cells.map((c) => el("td", void 0, c)))))
  );
}
function codeBlock(code, mark) {
  if (!code) {
    return muted("(no code)");
  }
  const lines = code.replace(/\n$/, "").split("\n");
  return el(
    "pre",
    { class: "kforge-code" },
    ...lines.map(
      (line, i) => el("span", { class: "kforge-line", "data-line": i + 1, "data-mark": mark === i + 1 }, line + "\n")
    )
  );
}

// src/record.ts
function num(value, digits = 4, suffix = "") {
  return value === null || value === void 0 ? "-" : `${Number(value.toPrecision(digits))}${suffix}`;
}
function fixed(value, digits = 2, suffix = "") {
  return value === null || value === void 0 ? "-" : `${value.toFixed(digits)}${suffix}`;
}
function percent(value) {
  return value === null || value === void 0 ? "-" : `${(value * 100).toFixed(1)}%`;
}
function firstLine(text, length = 120) {
  return (text || "").split("\n")[0].slice(0, length);
}
function validCi(ci) {
  if (!Array.isArray(ci) || ci.length !== 2) {
    return null;
  }
  const [low, high] = ci.map(Number);
  return Number.isFinite(low) && Number.isFinite(high) && low <= high ? [low, high] : null;
}
function pmText(point, ci) {
  const bounds = validCi(ci);
  if (!bounds || !point || !Number.isFinite(point)) {
    return "";
  }
  const pct = (bounds[1] - bounds[0]) / 2 / Math.abs(point) * 100;
  return pct < 0.95 ? `\xB1${pct.toFixed(1)}%` : `\xB1${pct.toFixed(0)}%`;
}
function speedupText(point, ci, noisy = false) {
  if (point === null || point === void 0) {
    return "-";
  }
  const pm = pmText(point, ci);
  return `${point.toFixed(2)}x${pm ? ` ${pm}` : ""}${noisy ? " (noisy)" : ""}`;
}
function intervalText(ci) {
  const bounds = validCi(ci);
  return bounds ? `95 % interval ${num(bounds[0], 3)}-${num(bounds[1], 3)}x` : "";
}
function spreadText(point, ci, noisy = false, compact = false) {
  if (point === null || point === void 0) {
    return "-";
  }
  const bounds = validCi(ci);
  const span = bounds ? `${num(bounds[0], 3)}-${num(bounds[1], 3)}x` : "";
  return `${point.toFixed(2)}x${span ? compact ? ` (${span})` : ` (95 % interval ${span})` : ""}${noisy ? " (noisy)" : ""}`;
}
function shownSpeedup(t, baseline = "eager", noisy = false, compact = false) {
  const point = baseline === "eager" ? t.speedup_vs_eager : t.speedup_vs_compile;
  const ci = baseline === "eager" ? t.speedup_vs_eager_ci : t.speedup_vs_compile_ci;
  return t.busy ? spreadText(point, ci, noisy, compact) : speedupText(point, ci, noisy);
}
function ownMs(t) {
  return t.busy && t.candidate_low_ms ? t.candidate_low_ms : t.candidate_ms;
}
function ownTimeText(t) {
  if (t.candidate_ms === null || t.candidate_ms === void 0) {
    return "";
  }
  if (t.busy && t.candidate_low_ms) {
    return `${num(t.candidate_low_ms)} ms, its own time (its blocks' low calls: the load mostly left out; their medians ${num(t.candidate_ms)} ms)`;
  }
  return `${num(t.candidate_ms)} ms`;
}
function decided(v) {
  return !!v && (v.verdict === "faster" || v.verdict === "slower" || v.verdict === "tie") && typeof v.ratio === "number";
}
function versusText(v) {
  if (!v || !v.id) {
    return "";
  }
  if (!decided(v)) {
    return `no head-to-head with ${v.id}: ${v.why || "it was not timed"}`;
  }
  const bounds = validCi(v.ci);
  const span = bounds ? ` (95 % interval ${num(bounds[0], 3)}-${num(bounds[1], 3)}x)` : "";
  if (v.verdict === "faster") {
    return `${v.ratio.toFixed(2)}x faster than ${v.id} side by side${span}`;
  }
  if (v.verdict === "slower") {
    return `${v.ratio.toFixed(2)}x, slower than ${v.id} side by side${span}`;
  }
  const noise = `${((v.noise || 0) * 100).toFixed(0)}%`;
  return `tie with ${v.id} side by side at ${v.ratio.toFixed(2)}x${span}: within \xB1${noise}, what one kernel shows against itself, or an interval across 1x`;
}
function versusTag(v) {
  if (!v || !v.id) {
    return "";
  }
  if (!decided(v)) {
    return `no head-to-head with ${v.id}`;
  }
  return v.verdict === "tie" ? `tie with ${v.id} side by side` : `${v.verdict} than ${v.id} side by side`;
}
var CEILING_NOTE = "ceiling underestimated";
function rooflineText(fraction, exceeded = false) {
  if (fraction === null || fraction === void 0) {
    return "-";
  }
  return exceeded || fraction > 1 ? `>100% (${CEILING_NOTE})` : percent(fraction);
}
function busyText(note, ids = []) {
  const which = ids.length ? ` (candidate${ids.length > 1 ? "s" : ""} ${ids.join(", ")})` : "";
  return `the machine was busy while timing${which}: speedups may be off${note ? `; ${note}` : ""}`;
}
function fromText(a) {
  const own = (a.decision === "edit" || a.decision === "redirect") && a.decision_text;
  const words = own ? a.decision_text : a.recommendation;
  return (a.decision || "") + (words ? `: ${words.slice(0, 60)}` : "");
}

// src/charts.ts
var EAGER = "#1565c0";
var COMPILE = "#ef6c00";
function speedupPoints(history) {
  return history.filter((a) => a.result.state === "correct" && a.result.timing?.real && a.result.timing?.speedup_vs_eager).map((a) => ({
    id: a.id,
    eager: a.result.timing?.speedup_vs_eager ?? null,
    compile: a.result.timing?.speedup_vs_compile ?? null,
    eagerCi: validCi(a.result.timing?.speedup_vs_eager_ci),
    compileCi: a.result.timing?.speedup_vs_compile ? validCi(a.result.timing?.speedup_vs_compile_ci) : null,
    busy: !!a.result.timing?.busy
  }));
}
function speedupChart(points) {
  if (points.length === 0) {
    return muted("no timed candidate yet");
  }
  const width = 560;
  const height = 200;
  const left = 44;
  const bottom = 24;
  const values = points.flatMap((p) => [p.eager || 0, p.compile || 0, p.eagerCi?.[1] || 0, p.compileCi?.[1] || 0]);
  const top = Math.max(1.2, ...values) * 1.1;
  const x = (i) => left + i * (width - left - 16) / Math.max(points.length - 1, 1);
  const y = (v) => height - bottom - v / top * (height - bottom - 10);
  const chart = svg("svg", {
    class: "kforge-chart",
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": "speedup per correct candidate",
    "data-chart": "speedup"
  });
  chart.appendChild(
    svg("line", { x1: left, x2: width - 8, y1: y(1), y2: y(1), stroke: "#999", "stroke-dasharray": "4 3" })
  );
  chart.appendChild(svg("text", { x: 4, y: y(1) + 4, "font-size": 11 }, "1x"));
  chart.appendChild(svg("text", { x: 4, y: y(top / 1.1) + 4, "font-size": 11 }, `${num(top / 1.1, 2)}x`));
  for (const [key, colour] of [
    ["eager", EAGER],
    ["compile", COMPILE]
  ]) {
    const series = points.map((p, i) => [i, p[key]]).filter(([, v]) => v);
    if (series.length === 0) {
      continue;
    }
    chart.appendChild(
      svg("polyline", {
        points: series.map(([i, v]) => `${x(i)},${y(v)}`).join(" "),
        fill: "none",
        stroke: colour,
        "stroke-width": 2
      })
    );
    for (const [i, v] of series) {
      const ci = key === "eager" ? points[i].eagerCi : points[i].compileCi;
      if (ci) {
        const [lo, hi] = [y(Math.max(ci[0], 0)), y(ci[1])];
        const cx = x(i);
        const bar = svg("g", { class: "kforge-errorbar", "data-series": key, "data-id": points[i].id, stroke: colour, "stroke-width": 1.5 });
        bar.appendChild(svg("line", { x1: cx, x2: cx, y1: lo, y2: hi }));
        bar.appendChild(svg("line", { x1: cx - 4, x2: cx + 4, y1: lo, y2: lo }));
        bar.appendChild(svg("line", { x1: cx - 4, x2: cx + 4, y1: hi, y2: hi }));
        chart.appendChild(bar);
      }
      const span = intervalText(ci);
      chart.appendChild(
        svg(
          "circle",
          { cx: x(i), cy: y(v), r: 4, fill: colour },
          svg("title", void 0, points[i].busy ? `${points[i].id}: ${spreadText(v, ci)} vs ${key} (busy)` : `${points[i].id}: ${speedupText(v, ci)} vs ${key}${span ? ` (${span})` : ""}`)
        )
      );
    }
  }
  points.forEach((p, i) => chart.appendChild(svg("text", { x: x(i) - 8, y: height - 6, "font-size": 11 }, p.id)));
  return el(
    "figure",
    { class: "kforge-figure" },
    el(
      "figcaption",
      void 0,
      points.some((p) => p.eagerCi || p.compileCi) ? "speedup per correct candidate (higher is better; bars: 95 % interval): " : "speedup per correct candidate (higher is better): ",
      el("span", { class: "kforge-key", "data-series": "eager" }, "\u25CF vs eager"),
      " ",
      el("span", { class: "kforge-key", "data-series": "compile" }, "\u25CF vs torch.compile")
    ),
    chart
  );
}
function rooflineBars(history) {
  const rows = history.filter((a) => a.result.state === "correct" && a.result.roofline?.fraction_of_sol != null);
  if (rows.length === 0) {
    return muted("no roofline position yet (needs a real timing and a known device peak)");
  }
  return el(
    "div",
    { class: "kforge-bars", "data-chart": "roofline" },
    el("div", void 0, "fraction of the speed of light (roofline)"),
    ...rows.map((a) => {
      const frac = a.result.roofline?.fraction_of_sol;
      const over = frac > 1 || !!a.result.roofline?.ceiling_exceeded;
      const bar = el("span", { class: "kforge-bar", "data-ceiling": over ? "underestimated" : null });
      bar.style.width = `${over ? 100 : Math.min(Math.max(frac, 0), 1) * 100}%`;
      return el(
        "div",
        { class: "kforge-bar-row", "data-id": a.id },
        el("span", { class: "kforge-bar-label" }, a.id),
        el("span", { class: "kforge-bar-track" }, bar),
        el(
          "span",
          { title: over ? `measured ${percent(frac)}: no honest kernel beats the hardware, so the ceiling is too low` : null },
          `${rooflineText(frac, over)} (${a.result.roofline?.bound || "?"}-bound)`
        )
      );
    })
  );
}
function heat(x) {
  const v = Math.min(Math.max(x, 0), 1);
  return `rgb(${255 - Math.round(75 * v)},${Math.round(255 * (1 - v))},${Math.round(255 * (1 - v))})`;
}
function errorMap(map) {
  if (!map || !map.values || map.values.length === 0) {
    return muted(
      "no error map (the outputs matched, the check stopped before comparing values, or the record keeps maps for its latest candidates only)"
    );
  }
  const shape = map.shape.join("x");
  if (map.kind === "1d") {
    const values = map.values;
    const topValue2 = Math.max(...values) || 1;
    const chart2 = svg("svg", {
      class: "kforge-chart",
      viewBox: `0 0 ${values.length * 8} 100`,
      preserveAspectRatio: "none",
      "data-chart": "error-map"
    });
    values.forEach(
      (v, i) => chart2.appendChild(
        svg(
          "rect",
          { x: i * 8, y: 100 - v / topValue2 * 100, width: 7, height: v / topValue2 * 100, fill: "#c62828" },
          svg("title", void 0, `bin ${i}: ${num(v, 3)}`)
        )
      )
    );
    return el(
      "figure",
      { class: "kforge-figure" },
      el("figcaption", void 0, `max |error| per bin, output shape ${shape}; tallest ${num(topValue2, 3)}`),
      chart2
    );
  }
  const rows = map.values;
  const cols = rows[0]?.length || 0;
  const topValue = Math.max(0, ...rows.map((r) => Math.max(0, ...r))) || 1;
  const chart = svg("svg", {
    class: "kforge-chart kforge-heatmap",
    viewBox: `0 0 ${cols} ${rows.length}`,
    preserveAspectRatio: "none",
    "shape-rendering": "crispEdges",
    "data-chart": "error-map"
  });
  rows.forEach(
    (row, r) => row.forEach(
      (v, c) => chart.appendChild(
        svg(
          "rect",
          { x: c, y: r, width: 1, height: 1, fill: heat(v / topValue) },
          svg("title", void 0, `bin (${r}, ${c}): ${num(v, 3)}`)
        )
      )
    )
  );
  return el(
    "figure",
    { class: "kforge-figure" },
    el(
      "figcaption",
      void 0,
      `max |error| over the output (shape ${shape}), pooled to ${rows.length}x${cols}; white 0, dark red ${num(topValue, 3)}`
    ),
    chart
  );
}
function kernelTable(kernels, lane) {
  const total = kernels.reduce((sum, k) => sum + k.total_us, 0) || 1;
  return table(
    ["kernel", "calls", "total us", "share"],
    kernels.map((k) => {
      const bar = el("span", { class: "kforge-bar", "data-lane": lane });
      bar.style.width = `${k.total_us / total * 100}%`;
      return [k.name, String(k.calls), fixed(k.total_us, 1), el("span", { class: "kforge-bar-track" }, bar)];
    }),
    { "data-lane": lane }
  );
}
function timeline(reference, candidate) {
  const lanes = [
    ["reference", reference],
    ["candidate", candidate]
  ];
  const end = Math.max(1, ...lanes.flatMap(([, events]) => events.map((e) => e.start_us + e.duration_us)));
  const width = 640;
  const label = 80;
  const laneHeight = 24;
  const chart = svg("svg", {
    class: "kforge-chart",
    viewBox: `0 0 ${width} ${18 + 2 * (laneHeight + 8)}`,
    "data-chart": "timeline"
  });
  chart.appendChild(svg("text", { x: label, y: 12, "font-size": 11 }, "0 us"));
  chart.appendChild(svg("text", { x: width - 70, y: 12, "font-size": 11 }, `${num(end, 3)} us`));
  lanes.forEach(([lane, events], row) => {
    const y = 18 + row * (laneHeight + 8);
    chart.appendChild(svg("text", { x: 0, y: y + 16, "font-size": 12 }, lane));
    for (const e of events) {
      chart.appendChild(
        svg(
          "rect",
          {
            x: label + e.start_us / end * (width - label),
            y,
            width: Math.max(e.duration_us / end * (width - label), 0.8),
            height: laneHeight,
            class: "kforge-lane",
            "data-lane": lane
          },
          svg("title", void 0, `${e.name}: ${fixed(e.duration_us, 1)} us at ${fixed(e.start_us, 1)} us`)
        )
      );
    }
  });
  return el(
    "figure",
    { class: "kforge-figure" },
    el("figcaption", void 0, "kernel timeline of the best candidate (hover a box for its name)"),
    chart
  );
}

// src/diff.ts
function lineDiff(a, b) {
  const n = a.length;
  const m = b.length;
  if (n * m > 4e6) {
    return null;
  }
  const lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i2 = n - 1; i2 >= 0; i2--) {
    for (let j2 = m - 1; j2 >= 0; j2--) {
      lcs[i2 * (m + 1) + j2] = a[i2] === b[j2] ? lcs[(i2 + 1) * (m + 1) + j2 + 1] + 1 : Math.max(lcs[(i2 + 1) * (m + 1) + j2], lcs[i2 * (m + 1) + j2 + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push([" ", a[i++]]);
      j++;
    } else if (i < n && (j === m || lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1])) {
      out.push(["-", a[i++]]);
    } else {
      out.push(["+", b[j++]]);
    }
  }
  return out;
}
function diffView(previous, current, previousLabel) {
  if (!previous || !current) {
    return muted("(nothing to compare with)");
  }
  const lines = lineDiff(previous.split("\n"), current.split("\n"));
  if (lines === null) {
    return muted("(too large to diff here)");
  }
  const changed = lines.map(([op]) => op !== " ");
  if (!changed.includes(true)) {
    return muted(`identical to candidate ${previousLabel}`);
  }
  const near = (k) => changed.slice(Math.max(0, k - 2), k + 3).includes(true);
  const added = lines.filter(([op]) => op === "+").length;
  const removed = lines.filter(([op]) => op === "-").length;
  const body = el("pre", { class: "kforge-diff" });
  let skipped = false;
  lines.forEach(([op, text], k) => {
    if (!near(k)) {
      skipped = true;
      return;
    }
    if (skipped) {
      body.appendChild(el("span", { class: "kforge-diff-line", "data-op": "@" }, "\u2026\n"));
      skipped = false;
    }
    body.appendChild(el("span", { class: "kforge-diff-line", "data-op": op }, `${op} ${text}
`));
  });
  return el("div", void 0, el("div", void 0, `+${added} / -${removed} lines vs candidate ${previousLabel}`), body);
}

// src/tree.ts
var MAX_INDENT = 16;
function compareIds(a, b) {
  const key = (id) => {
    const m = /^(\d+)\.(\d+)$/.exec(id);
    return m ? [0, Number(m[1]), Number(m[2]), ""] : [1, 0, 0, id];
  };
  const [x, y] = [key(a), key(b)];
  for (let k = 0; k < 3; k++) {
    if (x[k] !== y[k]) {
      return x[k] - y[k];
    }
  }
  return x[3] < y[3] ? -1 : x[3] > y[3] ? 1 : 0;
}
function candidateTree(history, pruned = []) {
  const ids = new Set(history.map((a) => a.id));
  const children = /* @__PURE__ */ new Map();
  const roots = [];
  for (const a of history) {
    const parent = a.parent;
    if (parent && parent !== a.id && ids.has(parent)) {
      children.set(parent, [...children.get(parent) || [], a]);
    } else {
      roots.push(a);
    }
  }
  const cut = new Set(pruned);
  const byId = (x, y) => compareIds(x.id, y.id);
  const seen = /* @__PURE__ */ new Set();
  const forest = [];
  for (const start of [...roots.sort(byId), ...[...history].sort(byId)]) {
    if (seen.has(start.id)) {
      continue;
    }
    seen.add(start.id);
    const top = { candidate: start, depth: 0, greyed: cut.has(start.id), children: [] };
    forest.push(top);
    const stack = [top];
    while (stack.length) {
      const node = stack.pop();
      for (const child of (children.get(node.candidate.id) || []).sort(byId)) {
        if (seen.has(child.id)) {
          continue;
        }
        seen.add(child.id);
        const next = { candidate: child, depth: node.depth + 1, greyed: node.greyed || cut.has(child.id), children: [] };
        node.children.push(next);
        stack.push(next);
      }
    }
  }
  return forest;
}
function letters(k) {
  let out = "";
  for (let n = k + 1; n > 0; n = Math.floor((n - 1) / 26)) {
    out = String.fromCharCode(65 + (n - 1) % 26) + out;
  }
  return out;
}
function lineageLabels(history) {
  const lineages = [...new Set(history.map((a) => a.lineage).filter((l) => !!l))].sort(compareIds);
  return new Map(lineages.map((lineage, k) => [lineage, letters(k)]));
}
function treeTitle(r) {
  const s = r.search;
  const facts = s && s.strategy ? [`${s.strategy}, width ${s.width ?? 1}`] : [];
  for (const what of ["pinned", "pruned", "finished"]) {
    const ids = s && s[what] || [];
    if (ids.length) {
      facts.push(`${what} ${ids.join(", ")}`);
    }
  }
  return ["Candidates tree", ...facts].join(" \xB7 ");
}
function treeView(r, options) {
  if (r.history.length === 0) {
    return [muted("no candidate yet")];
  }
  const s = r.search;
  const pinned = new Set(s?.pinned || []);
  const pruned = new Set(s?.pruned || []);
  const finished = new Set(s?.finished || []);
  const labels = lineageLabels(r.history);
  const ids = new Set(r.history.map((a) => a.id));
  const tag = (name, text, title) => el("span", { class: "kforge-tag", "data-tag": name, title }, text);
  const row = (node) => {
    const a = node.candidate;
    const t = a.result.timing || {};
    const correct = a.result.state === "correct";
    const lineage = a.lineage ? labels.get(a.lineage) : void 0;
    const v = t.versus;
    const tieSaid = !!a.tie_with && decided(v) && v.id === a.tie_with;
    const versus = correct && !a.same_as && v && !tieSaid ? tag("versus", versusTag(v), versusText(v)) : null;
    const speed = t.speedup_vs_eager ? el(
      "span",
      { class: "kforge-tree-speed", title: `its speedup vs eager${intervalText(t.speedup_vs_eager_ci) ? ` (${intervalText(t.speedup_vs_eager_ci)})` : ""}` },
      ` ${shownSpeedup(t, "eager", false, true)}`
    ) : null;
    const timing = correct && t.candidate_ms != null && t.busy ? [el("span", { class: "kforge-tree-time", title: `its time: ${ownTimeText(t)}` }, ` ${num(ownMs(t))} ms`), versus ? " " : null, versus, speed] : correct && t.candidate_ms != null ? [
      el(
        "span",
        { class: "kforge-tree-time", title: `its time; its speedup vs eager${intervalText(t.speedup_vs_eager_ci) ? ` (${intervalText(t.speedup_vs_eager_ci)})` : ""}` },
        ` ${num(t.candidate_ms)} ms`,
        t.speedup_vs_eager ? ` ${speedupText(t.speedup_vs_eager, t.speedup_vs_eager_ci)}` : ""
      ),
      versus ? " " : null,
      versus
    ] : [];
    const pick = el("button", { class: "kforge-tree-id", "data-select": a.id, title: `show candidate ${a.id} in the tabs` }, a.id);
    pick.addEventListener("click", () => options.select(a.id));
    const steer = [];
    if (options.steer) {
      const send = options.steer;
      const button = (action, title) => {
        const b = el("button", { class: "kforge-button kforge-mini", "data-steer": action, "data-id": a.id, title }, action);
        b.addEventListener("click", () => send(action, a.id));
        steer.push(b);
      };
      if (pinned.has(a.id)) {
        button("unpin", `stop expanding ${a.id} every round`);
      } else if (correct && !node.greyed) {
        button("pin", `expand ${a.id} every round, before the search's own choices`);
      }
      if (pruned.has(a.id)) {
        button("unprune", `let the search expand ${a.id} and its descendants again`);
      } else if (!node.greyed) {
        button("prune", `never expand ${a.id} or anything descended from it again`);
      }
    }
    return el(
      "div",
      { class: "kforge-tree-row" },
      node.depth ? el("span", { class: "kforge-tree-elbow", "aria-hidden": "true" }, "\u2514") : null,
      pick,
      " ",
      badge(a.result.state),
      ...timing,
      lineage ? tag("lineage", lineage, `lineage of candidate ${a.lineage}`) : null,
      a.parent && !ids.has(a.parent) ? tag("parent", `\u2190 ${a.parent}`, `made from ${a.parent}, not in this record`) : null,
      a.id === r.best_id ? tag("best", "\u2605 best", "the best candidate so far") : null,
      a.same_as ? tag("same", `same as ${a.same_as}`, `its code repeats ${a.same_as}'s (comments aside): not judged again, its verdict taken`) : null,
      a.tie_with && !a.same_as ? tieSaid ? tag("tie", `tie with ${a.tie_with} side by side`, `${versusText(v)}: ${a.tie_with} stayed best`) : tag("tie", `tie with ${a.tie_with}`, `faster than ${a.tie_with} on its point, but their 95 % intervals overlap: ${a.tie_with} stayed best`) : null,
      correct && t.noisy && !a.same_as ? tag("noisy", "noisy", t.noise_note || "the interval stayed wider than the goal") : null,
      t.busy && !a.same_as ? tag("busy", "busy", t.busy_note || "the machine was busy while timing") : null,
      pinned.has(a.id) ? tag("pinned", "pinned", "expanded every round") : null,
      pruned.has(a.id) ? tag("pruned", "pruned", "never expanded again, nor its descendants") : null,
      finished.has(a.id) ? tag("finished", "finished", "the analyst had nothing more for it") : null,
      a.applied ? el("span", { class: "kforge-tree-applied", title: `the change it was asked to make: ${a.applied}` }, a.applied.slice(0, 60)) : null,
      ...steer
    );
  };
  const item = (node) => {
    const a = node.candidate;
    const li = el(
      "li",
      {
        "data-role": "tree-node",
        role: "treeitem",
        "data-id": a.id,
        "data-state": a.result.state,
        "data-depth": node.depth,
        "data-pinned": pinned.has(a.id),
        "data-pruned": pruned.has(a.id),
        "data-greyed": node.greyed,
        "data-finished": finished.has(a.id),
        "data-best": a.id === r.best_id,
        "aria-selected": String(a.id === options.selected)
      },
      row(node)
    );
    if (node.children.length) {
      li.appendChild(el("ul", { role: "group", "data-flat": node.depth + 1 >= MAX_INDENT }, ...node.children.map(item)));
    }
    return li;
  };
  return [
    options.steer ? el(
      "div",
      { class: "kforge-muted kforge-tree-hint" },
      "pin: expand it every round \xB7 prune: never expand it or its descendants again"
    ) : null,
    el("ul", { class: "kforge-tree", role: "tree" }, ...candidateTree(r.history, pruned).map(item))
  ];
}

// src/view.ts
var TABS = ["code", "errors", "correctness", "profile", "performance", "recommendation"];
var TITLES = {
  code: "Code",
  errors: "Errors",
  correctness: "Correctness",
  profile: "Profile",
  performance: "Performance",
  recommendation: "Recommendation"
};
var DECISIONS = ["accept", "edit", "redirect", "skip", "stop"];
var SAVED = "saved run \u2014 no kernel";
function textBox(input, placeholder, rows) {
  return el("textarea", { "data-input": input, placeholder, rows, spellcheck: "false", class: "kforge-input" });
}
var RunView = class {
  constructor(parent, host) {
    this.host = host;
    this.record = null;
    this.message = "";
    this.selected = null;
    // null: the latest candidate (the best once finished)
    this.tab = "code";
    this.shownPending = "";
    this.drawn = /* @__PURE__ */ new Map();
    // section -> key of what it shows now
    this.headInfo = el("div", { class: "kforge-header-info" });
    this.stopButton = el("button", { "data-action": "stop", class: "kforge-button", "data-kind": "danger" }, "Stop");
    this.header = el("div", { class: "kforge-header", "data-role": "header" }, this.headInfo);
    this.notes = el("div", { class: "kforge-notes" });
    this.statusText = el("span", { class: "kforge-status-text" });
    this.messageText = el("span", { class: "kforge-reply", "data-role": "message" });
    this.strip = el("div", { class: "kforge-strip", "data-role": "candidates" });
    this.treeSummary = el("summary", { class: "kforge-tree-title" }, "Candidates tree");
    this.treeBody = el("div", { class: "kforge-tree-body" });
    this.tree = el("details", { class: "kforge-tree-box", "data-role": "tree", open: true }, this.treeSummary, this.treeBody);
    this.steering = false;
    // a Pin / Prune was sent: its buttons wait for the kernel's answer
    this.tabButtons = {};
    this.panes = {};
    this.views = {};
    this.editor = textBox("code", "edit the candidate here, then evaluate it", 16);
    this.editorFilled = "";
    this.evaluateButton = el("button", { "data-action": "evaluate", class: "kforge-button", "data-kind": "primary" }, "Evaluate my edit");
    this.buttons = {};
    this.editText = textBox("edit", "the recommendation, edited: Edit sends this", 4);
    this.editFilled = "";
    this.editFor = "";
    // the recommendation the Edit box was filled from
    this.redirectText = textBox("redirect", "your own instruction: Redirect sends this", 3);
    const live = this.live;
    this.root = el("div", { class: "kforge-run", "data-renderer": host.renderer, "data-state": "running" });
    const tabs = el("div", { class: "kforge-tabs", role: "tablist" });
    for (const tab of TABS) {
      const button = el("button", { "data-tab": tab, role: "tab", class: "kforge-tab" }, TITLES[tab]);
      button.addEventListener("click", () => this.show(tab));
      this.tabButtons[tab] = button;
      tabs.appendChild(button);
      this.views[tab] = el("div", { class: "kforge-pane-view" });
      this.panes[tab] = el("section", { "data-pane": tab, role: "tabpanel", class: "kforge-pane" }, this.views[tab]);
    }
    this.stopButton.addEventListener("click", () => this.send({ action: "stop" }));
    this.evaluateButton.addEventListener("click", () => this.send({ action: "evaluate", code: this.editor.value }));
    this.editor.readOnly = !live;
    this.panes.code.appendChild(
      el(
        "div",
        { class: "kforge-editor" },
        el("h4", void 0, "your edit"),
        this.editor,
        el("div", { class: "kforge-row" }, this.evaluateButton, live ? null : el("span", { class: "kforge-muted" }, SAVED))
      )
    );
    const kinds = { accept: "success", edit: "info", redirect: "warning", skip: "plain", stop: "danger" };
    for (const kind of DECISIONS) {
      this.buttons[kind] = el("button", { "data-action": kind, class: "kforge-button", "data-kind": kinds[kind] }, kind[0].toUpperCase() + kind.slice(1));
      this.buttons[kind].addEventListener("click", () => this.decide(kind));
    }
    this.controls = el(
      "div",
      { class: "kforge-controls" },
      el("div", { class: "kforge-row" }, ...DECISIONS.map((k) => this.buttons[k]), live ? null : el("span", { class: "kforge-muted" }, SAVED)),
      el("label", void 0, el("b", void 0, "Edit"), ": change the recommendation, then press Edit", this.editText),
      el("label", void 0, el("b", void 0, "Redirect"), ": ask for something else, then press Redirect", this.redirectText)
    );
    this.editText.readOnly = this.redirectText.readOnly = !live;
    this.root.append(
      this.header,
      this.notes,
      el("div", { class: "kforge-status", "data-role": "status" }, this.statusText, this.messageText),
      this.strip,
      this.tree,
      tabs,
      ...TABS.map((t) => this.panes[t])
    );
    parent.appendChild(this.root);
  }
  /** Whether a kernel is behind this view: the widget, or the report of a run that ran live in
   * this page (live.ts); never a report opened from disk. */
  get live() {
    return this.host.send !== void 0;
  }
  /** Draw a (new) record; `message` is the kernel's reply to the last action. */
  update(record, message = "") {
    this.record = record;
    this.message = message;
    if (this.steering) {
      this.steering = false;
      this.drawn.delete("tree");
    }
    this.render();
  }
  /** Show candidate `id` in the tabs (null: follow the latest). */
  select(id) {
    this.selected = id;
    this.render();
  }
  show(tab) {
    this.tab = tab;
    this.render();
  }
  send(action) {
    if (this.live && this.host.send) {
      this.host.send(action);
    }
  }
  steer(action, id) {
    this.send({ action, id });
    this.steering = true;
    for (const button of Array.from(this.treeBody.querySelectorAll("button[data-steer]"))) {
      button.disabled = true;
    }
  }
  decide(kind) {
    const text = kind === "edit" ? this.editText.value : kind === "redirect" ? this.redirectText.value : void 0;
    this.send(text === void 0 ? { action: kind } : { action: kind, text });
    for (const button of Object.values(this.buttons)) {
      button.disabled = true;
    }
  }
  render() {
    const r = this.record;
    if (!r) {
      return;
    }
    const running = r.state === "running";
    this.root.setAttribute("data-state", r.state);
    this.root.setAttribute("data-run-id", r.run_id || "");
    const sel = this.selection(r);
    const index = sel ? r.history.indexOf(sel) : -1;
    const parent = sel?.parent ? r.history.find((a) => a.id === sel.parent && a.code) : void 0;
    const previous = parent || r.history.slice(0, Math.max(index, 0)).reverse().find((a) => a.code) || null;
    if (this.live && r.pending && r.recommendation) {
      const key = `${r.recommendation.iteration}:${r.recommendation.parent}:${r.recommendation.title}`;
      if (key !== this.shownPending) {
        this.shownPending = key;
        this.tab = "recommendation";
      }
    }
    this.drawHeader(r);
    this.section("notes", JSON.stringify([r.timing_note, r.busy, r.notices, r.confirmation, r.summary.error]), this.notes, () => this.drawNotes(r));
    this.statusText.textContent = r.status;
    this.messageText.textContent = this.message ? ` \u2014 ${this.message}` : "";
    const strip = r.history.map((a) => `${a.id}:${a.result.state}:${this.chipSpeed(a)}:${this.chipTag(a)}`).join(",");
    this.section("strip", `${strip}|${r.best_id}|${sel?.id}`, this.strip, () => this.drawStrip(r, sel));
    const steerable = this.live && running;
    const nodes = r.history.map((a) => [
      a.id,
      a.result.state,
      a.parent,
      a.lineage,
      a.applied,
      a.result.timing?.candidate_ms,
      a.result.timing?.speedup_vs_eager_ci,
      a.same_as,
      a.tie_with,
      a.result.timing?.noisy,
      a.result.timing?.busy,
      a.result.timing?.candidate_low_ms,
      a.result.timing?.versus
    ]);
    const tree = JSON.stringify([nodes, r.best_id, r.search, sel?.id, steerable]);
    this.treeSummary.textContent = treeTitle(r);
    this.tree.hidden = r.history.length === 0;
    this.section(
      "tree",
      tree,
      this.treeBody,
      () => treeView(r, {
        steer: steerable ? (action, id2) => this.steer(action, id2) : void 0,
        select: (id2) => this.select(id2),
        selected: sel?.id ?? null
      })
    );
    for (const tab of TABS) {
      this.tabButtons[tab].setAttribute("aria-selected", String(tab === this.tab));
      this.panes[tab].hidden = tab !== this.tab;
    }
    const id = sel ? `${sel.id}:${sel.result.state}` : "";
    this.section("code", `${id}|${previous?.id}|${r.best_id}`, this.views.code, () => this.drawCode(r, sel, previous));
    this.section("errors", id, this.views.errors, () => this.drawErrors(sel));
    this.section("correctness", `${id}|${!!sel?.error_map}`, this.views.correctness, () => this.drawCorrectness(sel));
    const events = r.profile?.candidate_events?.length || 0;
    this.section("profile", `${id}|${r.best_id}|${events}`, this.views.profile, () => this.drawProfile(r, sel));
    const times = r.history.map((a) => `${a.id}:${a.result.state}:${a.result.timing?.candidate_ms}:${this.chipSpeed(a)}:${this.chipTag(a)}:${a.decision}`).join(",");
    this.section("performance", `${times}|${r.best_id}|${sel?.id}`, this.views.performance, () => this.drawPerformance(r, sel));
    const rec = JSON.stringify([r.recommendation, r.pending, r.state, r.decisions, r.summary.reason, r.best_id]);
    this.section("recommendation", rec, this.views.recommendation, () => this.drawRecommendation(r));
    const code = sel?.code || "";
    if (this.editor.value === this.editorFilled && code !== this.editorFilled) {
      this.editor.value = this.editorFilled = code;
    }
    const asked = r.recommendation;
    const recText = asked?.text || "";
    const recFor = asked ? `${asked.iteration}:${asked.parent}:${asked.title}` : "";
    if (recFor !== this.editFor) {
      this.editFor = recFor;
      this.editText.value = this.editFilled = recText;
      this.redirectText.value = "";
    } else if (this.editText.value === this.editFilled && recText !== this.editFilled) {
      this.editText.value = this.editFilled = recText;
    }
    this.evaluateButton.disabled = !this.live;
    if (running) {
      this.panes.recommendation.appendChild(this.controls);
      for (const kind of DECISIONS) {
        this.buttons[kind].disabled = !this.live || (kind === "stop" ? false : !r.pending);
      }
    } else {
      this.controls.remove();
    }
  }
  section(name, key, node, build) {
    if (this.drawn.get(name) !== key) {
      replace(node, ...build());
      this.drawn.set(name, key);
    }
  }
  selection(r) {
    const chosen = this.selected === null ? void 0 : r.history.find((a) => a.id === this.selected);
    if (chosen) {
      return chosen;
    }
    if (r.state === "finished" && r.best_id) {
      return r.history.find((a) => a.id === r.best_id) || null;
    }
    return r.history[r.history.length - 1] || null;
  }
  drawHeader(r) {
    const s = r.summary;
    const p = r.progress;
    const running = r.state === "running";
    let stats = `${s.candidates} candidates \xB7 ${fixed(s.elapsed_s, 0)} s \xB7 tokens ${s.input_tokens} in / ${s.output_tokens} out \xB7 $${fixed(s.cost_usd, 4)}`;
    if (r.best_id && s.candidate_ms != null) {
      const best = r.history.find((a) => a.id === r.best_id);
      const t = { ...s, ...best?.result.timing || {} };
      const versus = versusText(t.versus);
      if (t.busy) {
        stats += ` \xB7 best ${r.best_id}: ${ownTimeText(t)}${versus ? `, ${versus}` : ""}`;
        stats += t.speedup_vs_eager ? `, ${shownSpeedup(t, "eager", !!t.noisy)} vs eager` : "";
        stats += t.speedup_vs_compile ? `, ${shownSpeedup(t, "compile")} vs torch.compile` : "";
      } else {
        stats += ` \xB7 best ${r.best_id}: ${num(t.candidate_ms)} ms`;
        stats += t.speedup_vs_eager ? `, ${speedupText(t.speedup_vs_eager, t.speedup_vs_eager_ci, !!t.noisy)} vs eager` : "";
        stats += t.speedup_vs_compile ? `, ${speedupText(t.speedup_vs_compile, t.speedup_vs_compile_ci)} vs torch.compile` : "";
        stats += versus ? `, ${versus}` : "";
      }
    }
    replace(
      this.headInfo,
      el(
        "div",
        { class: "kforge-title" },
        el("b", void 0, "kforge"),
        ` \xB7 ${s.problem} on ${s.target} (${r.device || "?"}) \xB7 ${s.provider || "provider pending"}`,
        r.model ? ` \xB7 ${r.model}` : "",
        ` \xB7 mode ${r.mode}`,
        r.search && r.search.strategy ? ` \xB7 search ${r.search.strategy}${r.search.width > 1 ? ` (width ${r.search.width})` : ""}` : ""
      ),
      running ? el(
        "div",
        { class: "kforge-progress", "data-role": "progress" },
        `iteration ${p.iteration}/${p.iterations} `,
        el("progress", { max: Math.max(p.iterations, 1), value: Math.min(s.iterations, p.iterations) })
      ) : el("div", { class: "kforge-progress kforge-finished", "data-role": "progress" }, `finished: ${s.reason || "ended"}`),
      s.advice && !running ? el("div", { class: "kforge-advice", "data-role": "advice" }, s.advice) : null,
      el("div", { class: "kforge-stats" }, stats)
    );
    if (running) {
      this.header.appendChild(this.stopButton);
      this.stopButton.disabled = !this.live;
      this.stopButton.title = this.live ? "stop the session after the current step" : SAVED;
    } else {
      this.stopButton.remove();
    }
  }
  drawNotes(r) {
    return [
      r.timing_note ? el("div", { class: "kforge-note", "data-role": "timing-note" }, `\u26A0 timings are NOT performance figures here: ${r.timing_note}`) : null,
      r.busy ? el("div", { class: "kforge-note", "data-role": "busy" }, `\u26A0 ${busyText(r.busy.note || "", r.busy.ids || [])}`) : null,
      ...r.notices.map((text) => el("div", { class: "kforge-notice" }, text)),
      r.confirmation ? el("div", { class: "kforge-notice", "data-role": "confirmation" }, r.confirmation) : null,
      r.summary.error ? el("div", { class: "kforge-note" }, `\u26A0 ${r.summary.error}`) : null,
      !this.live ? el(
        "div",
        { class: "kforge-notice", "data-role": "saved-note" },
        `${SAVED}: the buttons and the editor are off (with the run's kernel, \`%kforge eval VAR\` judges an edit and \`%kforge last\` shows the run again)`
      ) : null
    ];
  }
  drawStrip(r, sel) {
    if (r.history.length === 0) {
      return [muted("no candidate yet")];
    }
    return r.history.map((a) => {
      const chip = el(
        "button",
        {
          class: "kforge-chip",
          "data-role": "candidate",
          "data-id": a.id,
          "data-state": a.result.state,
          "aria-pressed": String(a === sel),
          "data-tie": a.tie_with && !a.same_as ? a.tie_with : null,
          "data-same-as": a.same_as || null,
          "data-versus": a.result.timing?.versus?.verdict || null,
          title: [
            firstLine(a.result.message, 300),
            a.result.timing?.busy ? ownTimeText(a.result.timing) : "",
            versusText(a.result.timing?.versus),
            intervalText(a.result.timing?.speedup_vs_eager_ci),
            a.result.timing?.noise_note,
            a.result.timing?.busy_note
          ].filter((x) => x).join(" \xB7 ")
        },
        `${a.id} ${a.result.state}${this.chipSpeed(a) ? ` ${this.chipSpeed(a)}` : ""}${a.id === r.best_id ? " \u2605" : ""}${this.chipTag(a) ? ` \xB7 ${this.chipTag(a)}` : ""}`
      );
      chip.addEventListener("click", () => this.select(a.id));
      return chip;
    });
  }
  /** A correct candidate's speedup vs eager with its interval, for its chip ("" otherwise);
   * on a busy CPU its own time and its head-to-head first, then the speedup with its interval
   * written out: "0.45 ms · faster than 0.2 side by side · 1.90x (1.2-3.1x)". */
  chipSpeed(a) {
    const t = a.result.timing || {};
    if (a.result.state !== "correct" || !t.real) {
      return "";
    }
    if (t.busy && ownMs(t) != null) {
      const versus = this.sameOrTie(a) ? "" : this.versusOf(a);
      return [`${num(ownMs(t))} ms`, versus, t.speedup_vs_eager ? shownSpeedup(t, "eager", !!t.noisy, true) : ""].filter((x) => x).join(" \xB7 ");
    }
    return t.speedup_vs_eager ? speedupText(t.speedup_vs_eager, t.speedup_vs_eager_ci, !!t.noisy) : "";
  }
  /** What a chip says after its speedup: "same as 0.0", "tie with 0.0 (side by side)", or
   * (not busy: a busy chip's speed part said it) its head-to-head "faster than 0.0 side by
   * side". */
  chipTag(a) {
    return this.sameOrTie(a) || (a.result.timing?.busy ? "" : this.versusOf(a));
  }
  /** The head-to-head's few words, for a correct candidate judged itself (not a repeat). */
  versusOf(a) {
    return a.result.state === "correct" && !a.same_as ? versusTag(a.result.timing?.versus) : "";
  }
  /** "same as 0.0" (its code repeats 0.0's: not judged again) or "tie with 0.0" ("tie with 0.0
   * side by side" where its head-to-head says so). */
  sameOrTie(a) {
    if (a.same_as) {
      return `same as ${a.same_as}`;
    }
    const v = a.result.timing?.versus;
    return a.tie_with ? `tie with ${a.tie_with}${decided(v) && v.id === a.tie_with ? " side by side" : ""}` : "";
  }
  head(a, r) {
    const best = r && a.id === r.best_id ? " \u2605 best" : "";
    return el("div", { class: "kforge-pane-head" }, badge(a.result.state), ` candidate ${a.id} (${a.kind})${best}`);
  }
  drawCode(r, sel, previous) {
    if (!sel) {
      return [muted("no candidate yet")];
    }
    return [
      this.head(sel, r),
      sel.agent_notes ? el("div", { class: "kforge-muted", "data-role": "agent-notes" }, `agent: ${sel.agent_notes}`) : null,
      codeBlock(sel.code),
      el(
        "h4",
        void 0,
        previous ? `diff against ${previous.id === sel.parent ? "its parent, " : ""}candidate ${previous.id}` : "diff against the previous candidate"
      ),
      diffView(previous?.code || null, sel.code, previous?.id || "")
    ];
  }
  drawErrors(sel) {
    if (!sel) {
      return [muted("no candidate yet")];
    }
    const r = sel.result;
    if (r.state === "correct") {
      return [el("div", void 0, badge("correct"), " no errors")];
    }
    const err = r.error || {};
    const log = err.traceback || (err.log ? `log: ${err.log}` : "");
    return [
      el("div", { class: "kforge-pane-head" }, badge(r.state), " ", el("b", void 0, err.type || ""), ` candidate ${sel.id}`),
      el("pre", { class: "kforge-error" }, r.message),
      r.rules && r.rules.length ? el("div", void 0, `guardrail rules fired: ${r.rules.join(", ")}`) : null,
      err.line ? el("div", { "data-role": "error-line" }, `line ${err.line}: `, el("code", void 0, (err.source_line || "").trim())) : null,
      sel.code ? codeBlock(sel.code, err.line) : null,
      log ? el("details", void 0, el("summary", void 0, "full log"), el("pre", { class: "kforge-log" }, log)) : null
    ];
  }
  drawCorrectness(sel) {
    if (!sel) {
      return [muted("no candidate yet")];
    }
    const r = sel.result;
    const c = r.correctness || {};
    if (!c.trials) {
      return [el("div", void 0, badge(r.state), ` the candidate did not reach the correctness check (${firstLine(r.message, 200)})`)];
    }
    const tol = c.tolerance || {};
    const rows = [
      ["shape / dtype", `${(c.shape || []).join("x")} ${c.dtype || ""}`],
      ["trials passed", `${c.passed_trials} of ${c.trials}`],
      ["max abs error", num(c.max_abs_error, 3)],
      ["max rel error", num(c.max_rel_error, 3)],
      ["relative error norm", num(c.rel_norm_error, 3)],
      ["mismatch fraction", percent(c.mismatch_fraction)],
      ["tolerance", tol.policy ? `atol ${tol.atol}, rtol ${tol.rtol}, policy ${tol.policy}` : "-"]
    ];
    if (c.failed_check) {
      rows.push(["failed check", c.failed_check]);
    }
    const worst = c.worst || [];
    return [
      el("div", void 0, badge(r.state), ` ${r.message.slice(0, 300)}`),
      table(["", ""], rows, { "data-role": "correctness-stats" }),
      worst.length ? el("h4", void 0, "worst positions") : null,
      worst.length ? table(["index", "got", "expected"], worst.map((w) => [`[${w.index.join(", ")}]`, num(w.got, 6), num(w.expected, 6)])) : null,
      errorMap(sel.error_map)
    ];
  }
  drawProfile(r, sel) {
    if (!sel || !sel.kernels) {
      return [muted("profiles are taken for correct candidates only")];
    }
    const p = sel.result.profile || {};
    const events = r.profile || {};
    const traces = [p.trace, p.reference_trace].filter((t) => t);
    return [
      el("h4", void 0, `top kernels of candidate ${sel.id}`),
      kernelTable(sel.kernels.candidate, "candidate"),
      el("h4", void 0, "top kernels of the reference (eager)"),
      kernelTable(sel.kernels.reference, "reference"),
      sel.id === r.best_id && (events.candidate_events || []).length ? timeline(events.reference_events || [], events.candidate_events || []) : muted("the kernel timeline is kept for the best candidate"),
      traces.length ? el("div", { class: "kforge-muted" }, `Chrome traces (open in https://ui.perfetto.dev): ${traces.join(", ")}`) : null
    ];
  }
  /** The selected candidate's verdict in a few lines (result.py Result.summary): its time, its
   * speedups and its head-to-head with the best of its time; on a busy CPU its own time and
   * that head-to-head first, the speedups after with their intervals written out. */
  verdictLines(a) {
    const t = a.result.timing || {};
    if (a.result.state !== "correct" || t.candidate_ms == null) {
      return [];
    }
    if (!t.real) {
      return [`candidate ${num(t.candidate_ms)} ms (${t.note || "not a performance figure"})`];
    }
    const speeds = [
      t.speedup_vs_eager ? `${shownSpeedup(t, "eager", !!t.noisy)} vs eager` : "",
      t.speedup_vs_compile ? `${shownSpeedup(t, "compile")} vs torch.compile` : ""
    ].filter((x) => x);
    const versus = t.versus ? `head-to-head (beside the best when it was judged, in the same rounds): ${versusText(t.versus)}` : "";
    if (t.busy) {
      const eager = t.eager_ms != null ? ` (eager's blocks' median ${num(t.eager_ms)} ms: it carries the load)` : "";
      return [`candidate ${ownTimeText(t)}`, versus, speeds.length ? `${speeds.join(", ")}${eager}` : "", `busy: ${t.busy_note || "the machine was busy while timing"}`].filter(
        (x) => x
      );
    }
    return [[`candidate ${num(t.candidate_ms)} ms`, ...speeds].join(", "), versus].filter((x) => x);
  }
  drawPerformance(r, sel) {
    const rows = r.history.map((a) => {
      const t = a.result.timing || {};
      const row = el(
        "tr",
        { "data-role": "candidate-row", "data-id": a.id, "aria-selected": String(a === sel) },
        ...[
          `${a.id}${a.id === r.best_id ? " \u2605" : ""}`,
          a.kind,
          badge(a.result.state),
          t.busy && t.candidate_low_ms ? el("span", { "data-ms": "own", title: ownTimeText(t) }, `${num(t.candidate_low_ms)} own (busy)`) : num(t.candidate_ms) + (t.busy ? " (busy)" : ""),
          el("span", { "data-speedup": "eager", title: intervalText(t.speedup_vs_eager_ci) || null }, shownSpeedup(t, "eager", !!t.noisy, true)),
          el("span", { "data-speedup": "compile", title: intervalText(t.speedup_vs_compile_ci) || null }, shownSpeedup(t, "compile", false, true)),
          rooflineText(a.result.roofline?.fraction_of_sol, !!a.result.roofline?.ceiling_exceeded),
          fromText(a),
          [this.sameOrTie(a), a.result.state === "correct" ? "" : firstLine(a.result.message, 90)].filter((x) => x).join("; "),
          a.result.state === "correct" && !a.same_as && t.versus ? el("span", { "data-role": "versus" }, versusText(t.versus)) : ""
        ].map((c) => el("td", void 0, c))
      );
      row.addEventListener("click", () => this.select(a.id));
      return row;
    });
    const header = ["#", "kind", "verdict", "ms", "vs eager", "vs compile", "of roofline", "from", "message", "side by side"];
    const lines = sel ? this.verdictLines(sel) : [];
    return [
      lines.length ? el(
        "div",
        { class: "kforge-verdict", "data-role": "verdict", "data-id": sel?.id ?? null, "data-busy": !!sel?.result.timing?.busy },
        el("h4", void 0, `candidate ${sel?.id}${sel?.id === r.best_id ? " \u2605 best" : ""}`),
        ...lines.map((line) => el("div", { class: "kforge-verdict-line" }, line))
      ) : null,
      speedupChart(speedupPoints(r.history)),
      rooflineBars(r.history),
      el("h4", void 0, "candidates"),
      el(
        "table",
        { class: "kforge-table kforge-candidates" },
        el("thead", void 0, el("tr", void 0, ...header.map((h) => el("th", void 0, h)))),
        el("tbody", void 0, ...rows)
      )
    ];
  }
  drawRecommendation(r) {
    const rec = r.recommendation;
    return [
      rec ? el(
        "div",
        { class: "kforge-rec", "data-role": "recommendation" },
        el("div", void 0, el("b", void 0, rec.title), ` (iteration ${rec.iteration}${rec.parent ? `, for candidate ${rec.parent}` : ""})`),
        el("div", { class: "kforge-rec-text" }, rec.text),
        rec.expected_gain ? el("div", void 0, `expected gain: ${rec.expected_gain}`) : null
      ) : muted("no recommendation yet: the analysis agent speaks once a candidate is correct"),
      el("div", { class: "kforge-decision-state", "data-role": "decision-state" }, this.decisionState(r)),
      r.decisions.length ? el(
        "ol",
        { class: "kforge-decisions" },
        ...r.decisions.map((d) => el("li", void 0, `iteration ${d.iteration}: ${d.kind}${d.text ? ` \u2014 ${d.text.slice(0, 160)}` : ""}`))
      ) : null
    ];
  }
  decisionState(r) {
    if (r.state === "finished") {
      const best = r.best_id ? `best is candidate ${r.best_id}` : "no correct candidate";
      return `session finished: ${r.summary.reason || "ended"}; ${best}`;
    }
    if (r.pending) {
      return "waiting for your decision: Accept, Edit, Redirect, Skip or Stop";
    }
    if (r.mode !== "review") {
      return r.recommendation ? "accepted automatically (--mode auto)" : "recommendations are accepted automatically (--mode auto)";
    }
    return r.recommendation?.decision ? `decided: ${r.recommendation.decision}` : "no recommendation yet";
  }
};

// src/live.ts
var KEY = "__kforge_live_runs__";
function models() {
  const g = globalThis;
  const found = g[KEY] || /* @__PURE__ */ new Map();
  g[KEY] = found;
  return found;
}
function remember(model) {
  const record = model.get("record");
  if (record && record.run_id) {
    models().set(record.run_id, model);
  }
}
function reportView(parent, record) {
  const model = record.run_id ? models().get(record.run_id) : void 0;
  const view = new RunView(parent, { renderer: "mime", send: model ? (action) => model.send(action) : void 0 });
  let shown = record;
  const draw = () => {
    const newer = model ? model.get("record") : void 0;
    const current = newer && newer.state === "finished" ? newer : shown;
    view.update(current, model ? model.get("message") || "" : "");
  };
  model?.on("change:record", draw);
  model?.on("change:message", draw);
  draw();
  return {
    view,
    update(next) {
      shown = next;
      draw();
    },
    dispose() {
      model?.off("change:record", draw);
      model?.off("change:message", draw);
      view.root.remove();
    }
  };
}

// src/widget.ts
var widget_default = {
  render({ model, el: el2 }) {
    remember(model);
    const view = new RunView(el2, { renderer: "widget", send: (action) => model.send(action) });
    const draw = () => view.update(model.get("record"), model.get("message") || "");
    draw();
    model.on("change:record", draw);
    model.on("change:message", draw);
    return () => {
      model.off("change:record", draw);
      model.off("change:message", draw);
      view.root.remove();
    };
  }
};
export {
  RunView,
  widget_default as default,
  reportView
};
