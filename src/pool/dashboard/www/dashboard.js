// The pool dashboard page: renders the coordinator's snapshot and applies
// the events it pushes over /ws (docs/DASHBOARD.md). Everything shown comes
// from the pool and may come from untrusted workers (device names): it is
// only ever set as text, never parsed as HTML.
"use strict";

const MAX_EVENTS = 200;          // lines kept in the events feed
const MAX_PREVIEWS = 3;          // render jobs with a live canvas
const MAX_PENDING_TILES = 4096;  // tiles that arrived before their job's size
const MAX_IMAGE_SIDE = 16384;

const state = {
  previews: new Map(),  // job -> {canvas, ctx, caption, tiles, width, height}
  pending: new Map(),   // job -> [tile events]
  pendingCount: 0,
};

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (key === "class") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, value);
      else node[key] = value;
    }
  }
  for (const child of children) node.append(child);
  return node;
}

function shortId(id) {
  const text = String(id ?? "");
  return text.length > 14 ? text.slice(0, 12) + "…" : text;
}

function credits(text) { return text == null ? "–" : String(text); }

function score(value) {
  if (typeof value !== "number") return "–";
  if (value >= 1e9) return (value / 1e9).toFixed(2) + " G";
  if (value >= 1e6) return (value / 1e6).toFixed(1) + " M";
  if (value >= 1e3) return (value / 1e3).toFixed(1) + " k";
  return String(Math.round(value));
}

function percent(value) { return typeof value === "number" ? (value * 100).toFixed(1) + " %" : "–"; }

function clock(ms) {
  const d = ms ? new Date(ms) : new Date();
  return d.toLocaleTimeString([], { hour12: false });
}

// --- snapshot ------------------------------------------------------------------

function renderDevices(devices) {
  const body = document.querySelector("#devices tbody");
  const rows = devices.map((d) => {
    const online = !!d.online;
    return el("tr", { "data-device": d.id, class: online ? "online" : "offline" },
      el("td", { title: d.id }, d.name || d.kind, el("span", { class: "mono muted" }, " " + shortId(d.peer))),
      // A browser tab (webgpu, wasm) comes and goes with its page: marked apart, with its cap per task.
      el("td", {}, d.kind ?? "", d.browser ? el("span", { class: "badge browser" }, "browser") : ""),
      el("td", { class: "num", title: "the longest task this device takes" },
        d.max_task_seconds == null ? "–" : d.max_task_seconds + " s"),
      el("td", { class: "num", title: "calibration ops/s" }, score(d.score)),
      el("td", { class: "num" }, percent(d.reliability)),
      el("td", { class: "num" }, d.price == null ? "–" : String(d.price)),
      el("td", { class: "num earnings" }, credits(d.earnings)),
      el("td", { class: "num tasks-done" }, String(d.tasks_done ?? 0)),
      el("td", {}, el("span", { class: "dot" }), online ? "online" : "offline"));
  });
  body.replaceChildren(...rows);
  document.getElementById("devices-empty").hidden = devices.length > 0;
}

function progressBar(job) {
  const tasks = Math.max(1, job.tasks || 0);
  const fill = el("div", { class: "fill" });
  fill.style.width = (100 * (job.done || 0) / tasks).toFixed(2) + "%";
  const fail = el("div", { class: "fail" });
  fail.style.width = (100 * (job.failed || 0) / tasks).toFixed(2) + "%";
  return el("div", { class: "bar", title: `${job.done}/${job.tasks} done` }, fill, fail);
}

function renderJobs(jobs) {
  const body = document.querySelector("#jobs tbody");
  const rows = jobs.map((j) =>
    el("tr", { "data-job": j.job, "data-done": String(j.done ?? 0), "data-tasks": String(j.tasks ?? 0),
               class: "state-" + j.state },
      el("td", { class: "mono", title: j.job }, shortId(j.job)),
      el("td", {}, j.workload ?? ""),
      el("td", { class: "state", title: j.reason || "" }, j.state ?? ""),
      el("td", {}, progressBar(j)),
      el("td", { class: "num done" }, `${j.done ?? 0} / ${j.tasks ?? 0}`),
      el("td", { class: "num" }, String(j.running ?? 0)),
      el("td", { class: "num" }, String(j.failed ?? 0)),
      el("td", { class: "num" }, `${credits(j.credits_spent)} / ${credits(j.budget)}`)));
  body.replaceChildren(...rows);
  document.getElementById("jobs-empty").hidden = jobs.length > 0;
  for (const j of jobs) if (j.image) ensurePreview(j.job, j.image);
}

// --- trainings: a row each, with its loss (and accuracy, when the script reports it) by round -------

const SVG = "http://www.w3.org/2000/svg";
const CURVE_WIDTH = 240, CURVE_HEIGHT = 48;

function polyline(values, cls, lo, hi) {
  const n = values.length;
  const points = values.map((v, i) => {
    const x = n === 1 ? CURVE_WIDTH / 2 : (i * CURVE_WIDTH) / (n - 1);
    const y = hi > lo ? CURVE_HEIGHT - 2 - ((v - lo) * (CURVE_HEIGHT - 4)) / (hi - lo) : CURVE_HEIGHT / 2;
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("class", cls);
  line.setAttribute("points", points.join(" "));
  line.setAttribute("data-points", String(n));
  return line;
}

function curves(curve) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(CURVE_WIDTH));
  svg.setAttribute("height", String(CURVE_HEIGHT));
  svg.setAttribute("class", "curves");
  const losses = curve.map((c) => c.loss).filter((v) => typeof v === "number" && isFinite(v));
  if (losses.length) svg.append(polyline(losses, "loss", Math.min(...losses), Math.max(...losses)));
  const accuracies = curve.map((c) => c.accuracy).filter((v) => typeof v === "number" && isFinite(v));
  if (accuracies.length) svg.append(polyline(accuracies, "accuracy", 0, 1));
  return svg;
}

function renderTrainings(trainings) {
  document.getElementById("trainings-section").hidden = trainings.length === 0;
  const rows = trainings.map((t) => {
    const curve = Array.isArray(t.curve) ? t.curve : [];
    const last = curve.length ? curve[curve.length - 1] : {};
    const fixed = (v, digits) => (typeof v === "number" ? v.toFixed(digits) : "–");
    return el("tr", { "data-training": t.training, "data-rounds": String(t.rounds_done ?? 0), class: "state-" + t.state },
      el("td", { class: "mono", title: t.training }, shortId(t.training)),
      el("td", { class: "state", title: t.reason || "" }, t.state ?? ""),
      el("td", { class: "num" }, `${t.rounds_done ?? 0} / ${t.rounds ?? 0}`),
      el("td", { class: "num" }, fixed(last.loss, 4)),
      el("td", { class: "num" }, fixed(last.accuracy, 3)),
      el("td", {}, curves(curve)));
  });
  document.querySelector("#trainings tbody").replaceChildren(...rows);
}

function renderLedger(ledger) {
  if (!ledger) return;
  const audit = document.getElementById("audit");
  audit.textContent = ledger.audit_ok ? "audit OK" : "audit FAILED";
  audit.className = "badge " + (ledger.audit_ok ? "ok" : "broken");
  audit.title = (ledger.audit_problems || []).join("\n");
  const totals = ledger.totals || {};
  const names = [["minted", "Minted"], ["escrowed", "Escrowed"], ["paid", "Paid to providers"],
                 ["refunded", "Refunded"], ["held", "Held in escrow"]];
  document.getElementById("ledger-totals").replaceChildren(...names.map(([key, label]) =>
    el("div", {}, el("dt", {}, label), el("dd", {}, credits(totals[key])))));
  const rows = (ledger.recent || []).map((e) => {
    const negative = String(e.amount).startsWith("-");
    return el("tr", {},
      el("td", { class: "num" }, String(e.txn)),
      el("td", {}, clock(e.time)),
      el("td", {}, e.kind),
      el("td", { class: "mono", title: e.account }, shortId(e.account)),
      el("td", { class: "num " + (negative ? "neg" : "pos") }, String(e.amount)),
      el("td", { class: "mono", title: e.task || "" }, shortId(e.task || "")));
  });
  document.querySelector("#ledger tbody").replaceChildren(...rows);
}

function renderSnapshot(snap) {
  const devices = snap.devices || [];
  const jobs = snap.jobs || [];
  renderDevices(devices);
  renderJobs(jobs);
  renderTrainings(Array.isArray(snap.trainings) ? snap.trainings : []);
  renderLedger(snap.ledger);
  const online = devices.filter((d) => d.online).length;
  const running = jobs.filter((j) => j.state === "running").length;
  document.getElementById("summary").textContent =
    `${online} of ${devices.length} devices online · ${running} job${running === 1 ? "" : "s"} running`;
}

// --- render preview ------------------------------------------------------------

function ensurePreview(job, image) {
  if (state.previews.has(job)) return state.previews.get(job);
  const width = image && image.width, height = image && image.height;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1 ||
      width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE) return null;
  const canvas = el("canvas", { width, height, "data-job": job, "data-tiles": "0" });
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#07090c";
  ctx.fillRect(0, 0, width, height);
  const caption = el("figcaption", {}, `${shortId(job)} · ${width}×${height} · 0 tiles`);
  const figure = el("figure", {}, canvas, caption);
  const box = document.getElementById("previews");
  box.prepend(figure);
  const preview = { canvas, ctx, caption, figure, drawn: new Set(), width, height, job };
  state.previews.set(job, preview);
  document.getElementById("preview-section").hidden = false;
  while (state.previews.size > MAX_PREVIEWS) {  // the oldest canvas goes
    const [oldest, old] = state.previews.entries().next().value;
    old.figure.remove();
    state.previews.delete(oldest);
  }
  const waiting = state.pending.get(job);
  if (waiting) {
    state.pending.delete(job);
    state.pendingCount -= waiting.length;
    for (const tile of waiting) drawTile(preview, tile);
  }
  return preview;
}

function decodeBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// {"event":"tile_done","job":J,"x":..,"y":..,"w":..,"h":..,"png":"<base64>"}: the PNG is
// drawn with its top-left at (x, y), scaled to w×h; the canvas clips what falls outside.
async function drawTile(preview, tile) {
  const { x, y, w, h } = tile;
  if (![x, y, w, h].every(Number.isFinite) || typeof tile.png !== "string") return;
  try {
    const bitmap = await createImageBitmap(new Blob([decodeBase64(tile.png)], { type: "image/png" }));
    preview.ctx.drawImage(bitmap, x, y, w, h);
    bitmap.close();
  } catch (err) {
    return;  // a tile that does not decode is skipped; the feed still lists it
  }
  preview.drawn.add(`${x},${y}`);  // a tile replayed after a reconnect counts once
  const tiles = preview.drawn.size;
  preview.canvas.setAttribute("data-tiles", String(tiles));
  preview.caption.textContent = `${shortId(preview.job)} · ${preview.width}×${preview.height} · ${tiles} tiles`;
}

function onTile(tile) {
  const preview = state.previews.get(tile.job);
  if (preview) return drawTile(preview, tile);
  if (state.pendingCount >= MAX_PENDING_TILES) return;
  if (!state.pending.has(tile.job)) state.pending.set(tile.job, []);
  state.pending.get(tile.job).push(tile);
  state.pendingCount += 1;
}

// --- events feed ---------------------------------------------------------------

const BAD_EVENTS = new Set(["task_failed", "result_rejected", "worker_gone", "leases_expired"]);

function describe(event) {
  const parts = [];
  for (const [key, value] of Object.entries(event)) {
    if (key === "event" || key === "png" || value === "" || value == null) continue;
    const text = typeof value === "object" ? JSON.stringify(value) : String(value);
    parts.push(`${key}=${text.length > 24 ? text.slice(0, 22) + "…" : text}`);
  }
  return parts.join(" ");
}

function addEvent(event) {
  const list = document.getElementById("events");
  const name = String(event.event);
  list.prepend(el("li", { class: BAD_EVENTS.has(name) ? "bad" : "" },
    el("span", { class: "time" }, clock()),
    el("span", { class: "name" }, name),
    el("span", { class: "detail", title: describe(event) }, describe(event))));
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
}

// --- the live connection --------------------------------------------------------

function onMessage(message) {
  let event;
  try {
    event = JSON.parse(message.data);
  } catch (err) {
    return;
  }
  if (!event || typeof event.event !== "string") return;
  if (event.event === "snapshot") return renderSnapshot(event.snapshot || {});
  if (event.event === "tile_done") return onTile(event);  // shown on its canvas, not in the feed (hundreds per job)
  addEvent(event);
  if (event.event === "job_submitted" && event.image) ensurePreview(event.job, event.image);
}

function setConnection(label) {
  const conn = document.getElementById("conn");
  conn.dataset.state = label;
  conn.textContent = label;
}

let retryDelay = 500;

function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const socket = new WebSocket(scheme + location.host + "/ws");
  socket.addEventListener("open", () => {
    retryDelay = 500;
    setConnection("live");
  });
  socket.addEventListener("message", onMessage);
  socket.addEventListener("close", () => {
    // The server drops a page that falls behind, and the coordinator may restart: come back with a fresh snapshot.
    setConnection("reconnecting");
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 10000);
  });
}

connect();
