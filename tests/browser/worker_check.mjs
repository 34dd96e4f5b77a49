// Drives the pool's browser worker page (/join) in headless Debian chromium
// with WebGPU on SwiftShader, or with WebGPU off (the page falls back to
// WebAssembly) (tests/e2e/test_browser_worker.py runs it).
//
//   node worker_check.mjs JOIN_URL [webgpu|wasm]
//
// The page's /worker WebSocket goes through a relay in this script that
// records every request and answer, and tampers with the tile of the page's
// FIRST result (one base64 character changed after the page signed it), as
// a man in the middle would. Commands on stdin, one per line: "status",
// "pause", "resume", "quit". Each prints one JSON line
// {"stage":<command>, "state", "done", "device", "backend" (the page's
//  "Computes on" line), "earned", "sent":{op:n},
//  "accepted", "rejected":[why...], "tampered", "errors":[...]}; a line
// {"stage":"registered",...} comes by itself once the page registered.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

const [url, kind = "webgpu"] = process.argv.slice(2);
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

await page.routeWebSocket(/\/worker$/, (ws) => {
  const server = ws.connectToServer();
  ws.onMessage((text) => {
    let msg;
    try { msg = JSON.parse(text); } catch { server.send(text); return; }
    seen.sent[msg.op] = (seen.sent[msg.op] || 0) + 1;
    pending.push({ op: msg.op, file: msg.op === "result" ? msg.files[0].path : null });
    if (msg.op === "result" && !seen.tampered) {
      const d = msg.files[0].data;
      msg.files[0].data = (d[0] === "A" ? "B" : "A") + d.slice(1);
      seen.tampered = true;
      text = JSON.stringify(msg);
    }
    server.send(text);
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
