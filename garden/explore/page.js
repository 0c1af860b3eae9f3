"use strict";
(function () {
  const scene = JSON.parse(document.getElementById("scene").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const steps = scene.steps;
  const nodeById = new Map(scene.nodes.map((n) => [n.id, n]));
  const shapes = new Map();
  let current = -1;
  let selected = null;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") e.className = v; else e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  function fmt(x) { return x === null || x === undefined ? "–" : Number(x).toFixed(4); }
  function idLink(id) {
    const s = el("span", { class: "id", "data-id": id, title: "show on the graph" }, id);
    s.addEventListener("click", () => select(id));
    return s;
  }
  function labels(list, cls) { return (list || []).map((l) => el("span", { class: cls || "label" }, l)); }

  // --- header ----------------------------------------------------------------------
  document.getElementById("title").textContent = scene.title + (scene.case ? " · case " + scene.case : "");
  document.getElementById("query").textContent = "“" + scene.query + "”";
  document.getElementById("meta").textContent = "as of " + scene.as_of + " · budget " + scene.budget +
    " characters · pipeline " + scene.pipeline + " · baseline " + scene.baseline +
    (scene.case_passed === null ? "" : " · case " + (scene.case_passed ? "passes" : "fails"));
  const d = scene.drawn, lo = scene.left_out;
  document.getElementById("drawn").textContent = "Drawn: " + d.records + " of " + scene.store.records +
    " records, " + d.topics + " topics, " + d.people + " people. Left out: " + lo.records + " records (" +
    lo.candidates + " of " + lo.candidates_total + " candidates, " + lo.linked + " of " + lo.linked_total +
    " linked records).";
  const legend = document.getElementById("legend");
  for (const [color, text] of [["#1d2a3a", "query"], ["#e6b34a", "topic"], ["#9a6ab5", "person"],
    ["#4f79b5", "live candidate"], ["#2f8a55", "packed"], ["#d9b3ae", "rejected"], ["#b8c2cf", "not a candidate"]]) {
    const i = el("i"); i.style.background = color;
    legend.append(el("span", {}, i, text));
  }
  const kinds = [...new Set(scene.edges.map((e) => e.kind))].sort();
  if (kinds.length) {
    legend.append(el("span", { id: "edge-kinds" }, "edges: " + kinds.join(", ") +
      "; dashed red: the query's three best at this step"));
  }

  // --- the graph -------------------------------------------------------------------
  const graph = document.getElementById("graph");
  graph.setAttribute("viewBox", "0 0 " + scene.width + " " + scene.height);
  const edgeLayer = svg("g"), leadLayer = svg("g"), nodeLayer = svg("g");
  graph.append(edgeLayer, leadLayer, nodeLayer);
  for (const e of scene.edges) {
    const a = nodeById.get(e.from), b = nodeById.get(e.to);
    const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge " + e.kind });
    const t = svg("title"); t.textContent = e.from + " " + e.kind + " " + e.to;
    line.append(t);
    edgeLayer.append(line);
  }
  for (const n of scene.nodes) {
    const g = svg("g", { class: "node " + n.type, "data-id": n.id, transform: "translate(" + n.x + "," + n.y + ")" });
    let shape;
    if (n.type === "topic") shape = svg("rect", { x: -7, y: -7, width: 14, height: 14, rx: 2 });
    else if (n.type === "person") shape = svg("polygon", { points: "0,-9 8,5 -8,5" });
    else shape = svg("circle", { r: n.type === "query" ? 11 : 6 });
    const title = svg("title");
    title.textContent = n.type === "record" ? n.id + (n.title ? " · " + n.title : "") : n.label;
    const text = svg("text", { x: 9, y: 3 });
    text.textContent = n.type === "query" ? "query" : n.label;
    g.append(shape, title, text);
    g.addEventListener("click", () => select(n.id));
    if (n.type === "record" && scene.marks[n.id]) {
      const m = scene.marks[n.id].join(" ");
      if (m.includes("forbidden")) g.classList.add("marked-forbidden");
      if (m.includes("required")) g.classList.add("marked-required");
    }
    nodeLayer.append(g);
    shapes.set(n.id, { g, shape, text });
  }

  function paint(step) {
    const focus = new Set(step.focus || []);
    leadLayer.replaceChildren();
    const q = nodeById.get("query");
    for (const r of step.ranking.slice(0, 3)) {  // the query to its three best at this step
      const n = nodeById.get(r.id);
      if (!n) continue;
      leadLayer.append(svg("line", { x1: q.x, y1: q.y, x2: n.x, y2: n.y, class: "lead-line", "data-id": r.id }));
    }
    const scores = Object.values(step.state).map((s) => s[0] || 0);
    const top = Math.max(1e-9, ...scores);
    for (const n of scene.nodes) {
      const { g, shape } = shapes.get(n.id);
      g.classList.remove("live", "packed", "rejected", "focus", "faded", "selected");
      if (focus.has(n.id)) g.classList.add("focus");
      if (n.id === selected) g.classList.add("selected");
      if (n.type !== "record") continue;
      const s = step.state[n.id];
      if (!s) {
        shape.setAttribute("r", 5);
        if (Object.keys(step.state).length) g.classList.add("faded");
        continue;
      }
      const status = s[1].split(":")[0];
      g.classList.add(status);
      g.setAttribute("data-status", s[1]);
      shape.setAttribute("r", (6 + 10 * Math.max(0, (s[0] || 0)) / top).toFixed(1));
    }
  }

  // --- the side panel --------------------------------------------------------------
  const body = document.getElementById("step-body");
  const stepList = document.getElementById("steps");
  steps.forEach((s, i) => {
    const a = el("a", { href: "#step-" + s.id, "data-index": i }, (i + 1) + " " + s.stage);
    stepList.append(el("li", { "data-step": s.id }, a));
  });

  function rankingList(step) {
    if (!step.ranking.length) return null;
    const ol = el("ol", { class: "ranking", id: "ranking" });
    for (const r of step.ranking) {
      const s = step.state[r.id];
      ol.append(el("li", { "data-id": r.id, "data-score": r.score }, idLink(r.id), " ",
        el("span", { class: "score" }, fmt(r.score)), ...labels(r.labels)));
    }
    return [el("h3", {}, step.stage === "baseline" ? "Its ranking" : "Live candidates, best first"), ol];
  }

  function changesList(step) {
    if (!step.changes.length) return null;
    const ul = el("ul", { class: "changes" });
    for (const c of step.changes) {
      const li = el("li", { "data-id": c.id, "data-kind": c.kind }, idLink(c.id), " ",
        c.kind === "label" ? el("span", { class: "label" }, c.text) :
          c.kind === "rejected" ? el("span", { class: "reason" }, c.text) : c.text);
      for (const w of c.why) li.append(el("span", { class: "why" }, w));
      ul.append(li);
    }
    const more = Object.entries(step.unlisted).map(([k, n]) => n + " more " + k).join(", ");
    return [el("h3", {}, "What this stage changed"), ul, more ? el("p", { class: "why" }, "…and " + more + ".") : null];
  }

  function budgetBar(b) {
    const wrap = el("div", { id: "budget", "data-used": b.used, "data-limit": b.limit });
    const bar = el("div", { class: "bar" });
    for (const it of b.items) {
      const seg = el("div", { class: "seg", "data-id": it.id, title: it.id + ": " + it.chars + " characters" });
      seg.style.width = (100 * it.chars / Math.max(1, b.limit)).toFixed(2) + "%";
      bar.append(seg);
    }
    wrap.append(bar, el("div", { class: "caption" }, b.used + " of " + b.limit + " characters used (" +
      (100 * b.used / Math.max(1, b.limit)).toFixed(1) + "%), " + b.items.length + " items"));
    return wrap;
  }

  function stageExtras(step) {
    const out = [];
    if (step.spans) {
      const ul = el("ul", { class: "spans" });
      for (const s of step.spans) {
        ul.append(el("li", { "data-span": s.span, "data-credited": s.credited, class: s.credited ? "credited" : "refused" },
          "“" + s.span + "” in " + s.records + " record" + (s.records === 1 ? "" : "s") + ": ",
          s.credited ? "credited" : "refused, " + s.refused));
      }
      if (step.spans.length) out.push(el("h3", {}, "Spans tested"), ul);
    }
    if (step.lanes) {
      const ul = el("ul", { class: "lanes" });
      for (const l of step.lanes) {
        ul.append(el("li", { "data-lane": l.lane, "data-ratio": l.ratio, "data-answers": l.answers },
          l.lane + ": ratio " + (l.ratio === null ? "–" : l.ratio) + " against standout " + l.standout +
          " (best " + fmt(l.best) + ", rival " + fmt(l.rival) + "); " +
          (l.riding.length ? "rides: " + l.riding.join(", ") : "nothing rides")));
      }
      out.push(el("h3", {}, "Per lane"), ul);
    }
    if (step.budget) out.push(el("h3", {}, "Budget"), budgetBar(step.budget));
    if (step.items) {
      const ol = el("ol", { class: "items", id: "packet" });
      for (const it of step.items) {
        const li = el("li", { "data-id": it.id }, idLink(it.id), " ", el("span", { class: "score" }, fmt(it.score)),
          " " + it.kind + ", " + it.chars + " characters", ...labels(it.labels));
        for (const w of it.why) li.append(el("span", { class: "why" }, w));
        ol.append(li);
      }
      out.push(el("h3", {}, "Items"), ol);
      if (step.rejected.length) {
        const ul = el("ul", { class: "rejected" });
        for (const r of step.rejected) {
          const li = el("li", { "data-id": r.id, "data-reason": r.reason }, idLink(r.id), " ",
            el("span", { class: "reason" }, r.reason));
          if (r.detail) li.append(el("span", { class: "why" }, r.detail));
          ul.append(li);
        }
        out.push(el("h3", {}, "Not packed (" + step.rejected_total + ")"), ul);
      }
      if (scene.case_failures !== null) {
        out.push(el("h3", {}, "The case's expectations"));
        out.push(el("p", { id: "case-verdict", "data-passed": scene.case_passed },
          scene.case_passed ? "Every expectation holds." : "Failed: " + scene.case_failures.join("; ")));
      }
    }
    if (step.controls) {
      const ul = el("ul", { class: "controls" });
      for (const c of step.controls) {
        const li = el("li", { class: "control", "data-name": c.name, "data-decision": c.decision, "data-passed": c.passed },
          el("strong", {}, c.name), el("span", { class: "control-query why" }, c.query),
          el("span", { class: "why" }, c.decision.toUpperCase() + (c.passed ? " · holds" : " · fails: " + c.failures.join("; "))));
        const rl = el("ul", {});
        for (const r of c.refusals) rl.append(el("li", { class: "refusal", "data-rule": r.rule }, r.text));
        for (const s of c.credited) rl.append(el("li", { class: "credited" }, "“" + s + "” credited"));
        li.append(rl);
        if (c.packet.length) li.append(el("span", { class: "why" }, "packet: " + c.packet.join(", ")));
        ul.append(li);
      }
      out.push(ul);
    }
    return out;
  }

  function show(index) {
    index = Math.max(0, Math.min(steps.length - 1, index));
    const step = steps[index];
    current = index;
    const panel = document.getElementById("panel");
    panel.setAttribute("data-step", step.id);
    panel.setAttribute("data-index", index);
    document.getElementById("position").textContent = "step " + (index + 1) + " of " + steps.length;
    document.getElementById("prev").disabled = index === 0;
    document.getElementById("next").disabled = index === steps.length - 1;
    for (const li of stepList.children) li.classList.toggle("current", li.getAttribute("data-step") === step.id);
    document.getElementById("step-title").textContent = step.title;
    body.replaceChildren();
    const sum = el("div", { class: "summary" });
    for (const p of step.summary) sum.append(el("p", {}, p));
    body.append(sum);
    for (const part of [rankingList(step), changesList(step), stageExtras(step)]) {
      if (part) body.append(...part.filter(Boolean));
    }
    paint(step);
    if (selected) detail(selected);
    const hash = "#step-" + step.id;
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  function detail(id) {
    const box = document.getElementById("detail");
    box.replaceChildren();
    const n = nodeById.get(id);
    if (!n) { box.append(el("p", {}, id + " is not drawn (left out of the neighbourhood).")); return; }
    box.append(el("strong", {}, n.type === "record" ? n.id : n.label), " ", n.type === "record" ? n.kind : n.type);
    if (n.type === "record") {
      if (n.title) box.append(el("div", {}, n.title));
      if (n.at) box.append(el("div", { class: "why" }, n.at + " · " + n.size + " characters"));
      box.append(el("div", { class: "text" }, n.text));
      const s = steps[current].state[id];
      box.append(el("div", { class: "why" }, s ? "at this step: " + s[1] + ", score " + fmt(s[0]) : "not a candidate at this step"));
      for (const m of scene.marks[id] || []) box.append(el("span", { class: "mark" }, m));
    }
  }

  function select(id) {
    selected = id;
    detail(id);
    paint(steps[current]);
  }

  function fromHash() {
    const m = /^#step-(.+)$/.exec(location.hash);
    const i = m ? steps.findIndex((s) => s.id === decodeURIComponent(m[1])) : -1;
    return i >= 0 ? i : 0;
  }

  document.getElementById("prev").addEventListener("click", () => show(current - 1));
  document.getElementById("next").addEventListener("click", () => show(current + 1));
  stepList.addEventListener("click", (ev) => {
    const a = ev.target.closest("a");
    if (!a) return;
    ev.preventDefault();
    show(Number(a.getAttribute("data-index")));
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === "ArrowRight" || ev.key === "PageDown" || ev.key === "j") { show(current + 1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft" || ev.key === "PageUp" || ev.key === "k") { show(current - 1); ev.preventDefault(); }
    else if (ev.key === "Home") { show(0); ev.preventDefault(); }
    else if (ev.key === "End") { show(steps.length - 1); ev.preventDefault(); }
  });
  window.addEventListener("hashchange", () => { const i = fromHash(); if (i !== current) show(i); });
  show(fromHash());
  document.body.setAttribute("data-ready", "1");
})();
