// Drives the pool dashboard in headless Debian chromium (tests/e2e/test_dashboard.py runs it).
//
//   node dashboard_check.mjs URL SCREENSHOT DEVICES RENDER_JSON
//
// Page 1 (as a user opens it): waits until DEVICES device rows are shown and
// prints {"stage":"ready"}; the caller then submits a job. It samples the
// job's done count in the page until the job is done (the page only listens
// to its WebSocket), saves SCREENSHOT mid-job, and records every request and
// WebSocket frame. Page 2: the live preview of a real render job (submitted
// by the caller after {"stage":"preview-ready"}): tiles must appear as they
// finish and the canvas must show the pixels of the final stitched image.
// Prints one JSON object per line; the last is {"stage":"result",...}.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, screenshot, devicesWanted, renderJson] = process.argv.slice(2);
const render = JSON.parse(renderJson);  // {"width","height","tile","image"}: the render job the caller submits
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

  // Page 2: the render preview of a real render job, which the caller
  // submits once this page is live; its canvas is compared with the
  // stitched image the job writes to IMAGE.
  const preview = await context.newPage();
  preview.on("console", (m) => { if (m.type() === "error") result.console_errors.push(m.text()); });
  preview.on("pageerror", (e) => result.page_errors.push(String(e)));
  await preview.goto(url);
  await preview.waitForFunction(() => document.querySelector("#conn").dataset.state === "live", null,
                                { timeout: 20000 });
  say({ stage: "preview-ready" });
  const tilesWanted = Math.ceil(render.width / render.tile) * Math.ceil(render.height / render.tile);
  // Tiles appear one by one while the job runs (sampled), then all of them.
  const counts = [];
  const until = Date.now() + 90000;
  while (Date.now() < until) {
    const n = await preview.evaluate(() => {
      const c = document.querySelector("canvas[data-job]");
      return c ? Number(c.dataset.tiles) : 0;
    });
    if (!counts.length || counts.at(-1) !== n) counts.push(n);
    if (n >= tilesWanted) break;
    await sleep(50);
  }
  while (!fs.existsSync(render.image) && Date.now() < until) await sleep(100);
  const imageB64 = fs.readFileSync(render.image).toString("base64");
  result.preview = await preview.evaluate(async ({ render, imageB64 }) => {
    const canvas = document.querySelector("canvas[data-job]");
    const bytes = Uint8Array.from(atob(imageB64), (c) => c.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
    const final = new OffscreenCanvas(bitmap.width, bitmap.height).getContext("2d");
    final.drawImage(bitmap, 0, 0);
    const ctx = canvas.getContext("2d");
    const shown = [], expected = [];
    for (let y = 0; y < render.height; y += render.tile)
      for (let x = 0; x < render.width; x += render.tile) {
        // A tile's core centre lies in no other tile's overlap border.
        const cx = Math.min(x + (render.tile >> 1), render.width - 1), cy = Math.min(y + (render.tile >> 1), render.height - 1);
        shown.push(Array.from(ctx.getImageData(cx, cy, 1, 1).data.slice(0, 3)));
        expected.push(Array.from(final.getImageData(cx, cy, 1, 1).data.slice(0, 3)));
      }
    return { width: canvas.width, height: canvas.height, tiles: Number(canvas.dataset.tiles), shown, expected,
             section_visible: !document.querySelector("#preview-section").hidden };
  }, { render, imageB64 });
  result.preview.counts = counts;
  await preview.screenshot({ path: screenshot.replace(/\.png$/, "-preview.png"), fullPage: true });
} catch (e) {
  result.error = String(e && e.stack || e);
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
say(result);
