// Opens the pool's browser worker page (/join) under a name that is not
// localhost, as a phone on a network would (tests/e2e/test_http_tls.py runs it).
//
//   node tls_check.mjs URL HOST_RULES SPKI_HASH [secure|insecure]
//
// HOST_RULES maps the name to the loopback port (chromium's
// --host-resolver-rules); SPKI_HASH (base64 SHA-256 of the certificate's
// SubjectPublicKeyInfo, or "-") makes chromium trust that self-signed
// certificate without turning certificate checks off.
// secure: waits until the page registered on WebGPU, then until it has done a
// task, then keeps the page open until stdin closes and reports once more.
// insecure: waits until the page gives up, for its message.
// Prints one JSON line per stage: {"stage", "secure_context", "state",
// "device", "backend", "done", "error", "errors":[page errors]}.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, hostRules, spki, mode = "secure"] = process.argv.slice(2);
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "runsnack-chromium-"));
const args = ["--headless", "--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--enable-unsafe-webgpu",
              "--use-webgpu-adapter=swiftshader", `--host-resolver-rules=${hostRules}`];
if (spki !== "-") args.push(`--ignore-certificate-errors-spki-list=${spki}`);
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args });
const errors = [];
const page = context.pages()[0] || (await context.newPage());
page.on("pageerror", (e) => errors.push(String(e)));

async function status(stage) {
  const read = (id) => page.textContent("#" + id).catch(() => null);
  say({ stage, secure_context: await page.evaluate(() => window.isSecureContext).catch(() => null),
        has_subtle: await page.evaluate(() => Boolean(globalThis.crypto && crypto.subtle)).catch(() => null),
        state: await page.getAttribute("#state", "data-state").catch(() => null), device: await read("device"),
        backend: await read("backend"), done: Number(await read("done")), error: await read("error"), errors });
}

try {
  await page.goto(url);
  if (mode === "secure") {
    await page.waitForFunction(() => document.querySelector("#device").textContent.includes("/webgpu") &&
                                     !["calibrating", "connecting"].includes(document.querySelector("#state").dataset.state),
                               null, { timeout: 90000 });
    await status("registered");
    await page.waitForFunction(() => Number(document.querySelector("#done").textContent) >= 1, null, { timeout: 180000 });
    await status("done");
    for await (const _ of process.stdin) { /* until the test closes it */ }
    await status("closing");
  } else {
    await page.waitForFunction(() => document.querySelector("#state").dataset.state === "error", null, { timeout: 60000 });
    await status("refused");
  }
} catch (e) {
  errors.push("driver: " + String(e).slice(0, 300));
  await status("failed");
}
await context.close();
fs.rmSync(profile, { recursive: true, force: true });
