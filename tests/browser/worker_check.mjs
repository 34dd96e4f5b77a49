// Drives the pool's browser worker page (/join) in headless Debian chromium
// with WebGPU on SwiftShader, or with WebGPU off (the page falls back to
// WebAssembly) (tests/e2e/test_browser_worker.py runs it).
//
//   node worker_check.mjs JOIN_URL [webgpu|wasm] [--resign-pixels | --honest]
//
// The page's /worker WebSocket goes through a relay in this script that
// records every request and answer, and tampers with the tile of the page's
// FIRST result (one base64 character changed after the page signed it), as
// a man in the middle would. With --resign-pixels it plays a dishonest
// browser owner instead, on render tiles: the first result is re-signed
// unchanged with the page's own key from IndexedDB (a control: it must still
// be accepted), the second has every pixel of its PNG inverted and is signed
// anew with that key, so only the coordinator's pixel check can catch it.
// With --honest it relays unchanged (bench/browser_render_bench.py). Commands on stdin, one per line: "status",
// "pause", "resume", "quit". Each prints one JSON line
// {"stage":<command>, "state", "done", "device", "backend" (the page's
//  "Computes on" line), "earned", "sent":{op:n}, "accepted", "rejected":[why...],
//  "tampered", "errors":[...], "first_task_ms" (page open to the first claim answered with a task)}; a line
// {"stage":"registered",...} comes by itself once the page registered.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import crypto from "node:crypto";
import zlib from "node:zlib";

const [url, kind = "webgpu", mode] = process.argv.slice(2);
const resign = mode === "--resign-pixels", honest = mode === "--honest";
// No --enable-unsafe-webgpu: headless chromium then offers no WebGPU adapter.
const gpuArgs = kind === "webgpu" ? ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] : [];
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "runsnack-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", ...gpuArgs],
});

// accepted_files: accepted results by the file they carried (tile.f32: matmul, tile.bin: render).
const seen = { sent: {}, accepted: 0, accepted_files: {}, rejected: [], tampered: false, errors: [] };
const pending = [];  // ops sent by the page, in order, awaiting answers (with a result's file name)
const page = context.pages()[0] || (await context.newPage());
page.on("console", (m) => { if (m.type() === "error") seen.errors.push(m.text()); });
page.on("pageerror", (e) => seen.errors.push(String(e)));

// A tile.bin (render/tile_wire.hpp) with every pixel of its PNG inverted. The page writes filter 0 on every
// row (render_webgpu.js), so the inflated IDAT is the pixels with one 0 byte before each row.
function invertTile(wire) {
  const png = wire.subarray(28);
  const w = png.readUInt32BE(16), h = png.readUInt32BE(20);
  const idat = [];
  for (let at = 8; at < png.length;) {
    const n = png.readUInt32BE(at), type = png.toString("latin1", at + 4, at + 8);
    if (type === "IDAT") idat.push(png.subarray(at + 8, at + 8 + n));
    at += 12 + n;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  for (let i = 0; i < raw.length; i++) if (i % (1 + 3 * w) !== 0) raw[i] = 255 - raw[i];
  const chunk = (type, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, "latin1");
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(Buffer.concat([head.subarray(4), data])));
    return Buffer.concat([head, data, crc]);
  };
  const ihdr = png.subarray(16, 29);
  const out = Buffer.concat([png.subarray(0, 8), chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(raw)),
                             chunk("IEND", Buffer.alloc(0))]);
  const header = Buffer.from(wire.subarray(0, 28));
  header.writeUInt32LE(out.length, 24);
  if (h < 1) throw new Error("empty tile");
  return Buffer.concat([header, out]);
}

// The signature a result carries (pool_store_results.cpp result_signing_bytes), made with the page's key.
async function signAsPage(msg) {
  const sha = (b) => crypto.createHash("sha256").update(b).digest("hex");
  const text = "runsnack-pool-result-v1\n" + msg.task + "\n" + msg.attempt + "\n0\n" + sha(Buffer.from(msg.stdout, "base64")) +
               "\n" + sha(JSON.stringify(msg.files));
  return page.evaluate(async (text) => {
    const pair = await new Promise((resolve, reject) => {
      const open = indexedDB.open("runsnack-worker", 1);
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const req = open.result.transaction("keys").objectStore("keys").get("device");
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error);
      };
    });
    const sig = await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, new TextEncoder().encode(text));
    return Array.from(new Uint8Array(sig), (b) => b.toString(16).padStart(2, "0")).join("");
  }, text);
}

let results = 0;
async function tamper(msg) {
  results += 1;
  if (!resign) {
    const d = msg.files[0].data;
    msg.files[0].data = (d[0] === "A" ? "B" : "A") + d.slice(1);
    seen.tampered = true;
  } else if (msg.files[0].path === "tile.bin" && results <= 2) {
    if (results === 2) {
      msg.files[0].data = invertTile(Buffer.from(msg.files[0].data, "base64")).toString("base64");
      seen.tampered = true;
    }
    msg.signature = await signAsPage(msg);
  }
  return JSON.stringify(msg);
}

let relay = Promise.resolve();  // keeps the page's messages in order while one is being re-signed
await page.routeWebSocket(/\/worker$/, (ws) => {
  const server = ws.connectToServer();
  ws.onMessage((text) => {
    relay = relay.then(async () => {
      let msg;
      try { msg = JSON.parse(text); } catch { server.send(text); return; }
      seen.sent[msg.op] = (seen.sent[msg.op] || 0) + 1;
      const file = msg.op === "result" ? msg.files[0].path : null;
      if (msg.op === "result" && !honest && (resign || !seen.tampered)) {
        try { text = await tamper(msg); } catch (e) { seen.errors.push("tamper: " + e); }
      }
      pending.push({ op: msg.op, file });
      server.send(text);
    });
  });
  server.onMessage((text) => {
    const { op, file } = pending.shift() || {};
    try {
      const a = JSON.parse(text);
      if (op === "result" && a.accepted) {
        seen.accepted += 1;
        seen.accepted_files[file] = (seen.accepted_files[file] || 0) + 1;
      } else if (op === "result") {
        seen.rejected.push(a.why || a.error || "?");
      }
      if (op === "claim" && (a.tasks || []).length && seen.first_task_ms === undefined) seen.first_task_ms = Date.now() - opened;
    } catch { /* counted as sent anyway */ }
    ws.send(text);
  });
});

async function status(stage) {
  const read = (id) => page.textContent("#" + id).catch(() => null);
  say({ stage, state: await page.getAttribute("#state", "data-state").catch(() => null), done: Number(await read("done")),
        earned: await read("earned"), device: await read("device"), backend: await read("backend"), error: await read("error"),
        ...seen });
}

const opened = Date.now();
await page.goto(url);
try {
  await page.waitForFunction((kind) => document.querySelector("#device").textContent.includes("/" + kind) &&
                                   !["calibrating", "connecting"].includes(document.querySelector("#state").dataset.state),
                             kind, { timeout: 60000 });
  await status("registered");
} catch (e) {
  await status("failed");
}

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const cmd = line.trim();
  if (cmd === "pause" || cmd === "resume") {
    const paused = cmd === "pause";
    if ((await page.textContent("#pause")) === (paused ? "Pause" : "Resume")) await page.click("#pause");
    // Paused once the task in hand is answered and the page shows it.
    if (paused) await page.waitForFunction(() => document.querySelector("#state").dataset.state === "paused", null, { timeout: 60000 });
    await status(cmd);
  } else if (cmd === "status") {
    await status(cmd);
  } else if (cmd === "quit") {
    await status(cmd);
    break;
  }
}
await context.close();
fs.rmSync(profile, { recursive: true, force: true });
