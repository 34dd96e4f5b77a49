// Drives the pool dashboard in headless Debian chromium (tests/e2e/test_dashboard.py runs it).
//
//   node dashboard_check.mjs URL SCREENSHOT DEVICES
//
// Page 1 (as a user opens it): waits until DEVICES device rows are shown and
// prints {"stage":"ready"}; the caller then submits a job. It samples the
// job's done count in the page until the job is done (the page only listens
// to its WebSocket), saves SCREENSHOT mid-job, and records every request and
// WebSocket frame. Page 2: the render preview, with tile_done events (PNG
// tiles made in the browser) injected into the page's WebSocket alongside
// the server's messages, then reads the canvas pixels back.
// Prints one JSON object per line; the last is {"stage":"result",...}.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, screenshot, devicesWanted] = process.argv.slice(2);
const wanted = Number(devicesWanted || 1);
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "runsnack-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

const result = { stage: "result", console_errors: [], page_errors: [], requests: [], ws_frames: 0, ws_events: {} };
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
  page.on("pageerror", (e) => result.page_errors.push(String(e)));
  page.on("request", (r) => result.requests.push(new URL(r.url()).pathname));
  page.on("websocket", (ws) => ws.on("framereceived", (f) => {
    result.ws_frames += 1;
    try {
      const name = JSON.parse(f.payload).event;
      result.ws_events[name] = (result.ws_events[name] || 0) + 1;
    } catch (e) { /* not JSON: counted, not named */ }
  }));
  const response = await page.goto(url);
  result.page_status = response.status();
  result.csp = response.headers()["content-security-policy"] || "";

  await page.waitForFunction((n) => document.querySelectorAll("#devices tbody tr").length >= n, wanted,
                             { timeout: 20000 });
  result.devices = await page.$$eval("#devices tbody tr", (rows) => rows.map((r) => ({
    id: r.dataset.device, text: r.innerText, online: r.classList.contains("online") })));
  result.connection = await page.textContent("#conn");
  say({ stage: "ready" });

  // The job's progress as the page shows it, sampled until it is done.
  await page.waitForSelector("#jobs tbody tr[data-job]", { timeout: 20000 });
  const samples = [];
  let shot = false;
  const end = Date.now() + 40000;
  while (Date.now() < end) {
    const s = await page.$eval("#jobs tbody tr[data-job]", (r) => ({
      job: r.dataset.job, done: Number(r.dataset.done), tasks: Number(r.dataset.tasks),
      state: r.querySelector(".state").textContent }));
    if (!samples.length || samples.at(-1).done !== s.done || samples.at(-1).state !== s.state) samples.push(s);
    if (!shot && s.state === "running" && s.done >= s.tasks * 0.4) {
      await sleep(300);  // let the progress bar's transition settle
      await page.screenshot({ path: screenshot, fullPage: true });
      shot = true;
    }
    if (s.state !== "running") break;
    await sleep(100);
  }
  if (!shot) await page.screenshot({ path: screenshot, fullPage: true });
  result.samples = samples;
  result.devices_after = await page.$$eval("#devices tbody tr", (rows) => rows.map((r) => ({
    id: r.dataset.device, tasks_done: Number(r.querySelector(".tasks-done").textContent),
    earnings: r.querySelector(".earnings").textContent })));
  result.ledger_rows = await page.$$eval("#ledger tbody tr", (rows) => rows.length);
  result.audit = await page.textContent("#audit");
  result.events_shown = await page.$$eval("#events li .name", (els) => els.map((e) => e.textContent));

  // Page 2: the render preview, fed tiles through its WebSocket.
  const preview = await context.newPage();
  preview.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
  preview.on("pageerror", (e) => result.page_errors.push(String(e)));
  let toPage = null;
  await preview.routeWebSocket(/\/ws$/, (ws) => {
    ws.connectToServer();  // the server's messages still reach the page
    toPage = ws;
  });
  await preview.goto(url);
  await preview.waitForFunction(() => document.querySelector("#conn").dataset.state === "live", null,
                                { timeout: 20000 });
  const colors = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [0, 255, 255], [255, 0, 255],
                  [255, 128, 0], [128, 0, 255]];
  const tile = 64;
  const pngs = await preview.evaluate(async ({ colors, tile }) => {
    const out = [];
    for (const [r, g, b] of colors) {
      const canvas = new OffscreenCanvas(tile, tile);
      const ctx = canvas.getContext("2d");
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(0, 0, tile, tile);
      const bytes = new Uint8Array(await (await canvas.convertToBlob({ type: "image/png" })).arrayBuffer());
      let binary = "";
      for (const x of bytes) binary += String.fromCharCode(x);
      out.push(btoa(binary));
    }
    return out;
  }, { colors, tile });
  const job = "preview-check";
  toPage.send(JSON.stringify({ event: "job_submitted", job, image: { width: 4 * tile, height: 2 * tile } }));
  pngs.forEach((png, i) => {
    const x = (i % 4) * tile, y = Math.floor(i / 4) * tile;
    toPage.send(JSON.stringify({ event: "tile_done", job, x, y, w: tile, h: tile, png }));
  });
  await preview.waitForFunction((n) => {
    const c = document.querySelector('canvas[data-job="preview-check"]');
    return c && Number(c.dataset.tiles) >= n;
  }, pngs.length, { timeout: 10000 });
  result.preview = await preview.evaluate(({ tile }) => {
    const canvas = document.querySelector('canvas[data-job="preview-check"]');
    const ctx = canvas.getContext("2d");
    const pixels = [];
    for (let i = 0; i < 8; i++) {
      const x = (i % 4) * tile + tile / 2, y = Math.floor(i / 4) * tile + tile / 2;
      pixels.push(Array.from(ctx.getImageData(x, y, 1, 1).data.slice(0, 3)));
    }
    return { width: canvas.width, height: canvas.height, tiles: Number(canvas.dataset.tiles), pixels,
             section_visible: !document.querySelector("#preview-section").hidden };
  }, { tile });
  result.preview.expected = colors;
} catch (e) {
  result.error = String(e && e.stack || e);
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
say(result);
