// Opens the pool dashboard and reads its Trainings section once a training has ROUNDS rounds
// (tests/e2e/test_dashboard.py DashboardTrainingTest runs it).
//
//   node training_check.mjs URL TRAINING ROUNDS
//
// Prints one JSON line: {"stage": "result", "rows", "rounds", "state", "loss_points",
// "accuracy_points", "section_visible", "console_errors", "page_errors"} or {"stage": "result", "error"}.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [url, training, rounds] = process.argv.slice(2);
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "runsnack-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync"] });
const consoleErrors = [], pageErrors = [];
const page = context.pages()[0] || (await context.newPage());
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => pageErrors.push(String(e)));
try {
  await page.goto(url);
  const row = `#trainings tr[data-training="${training}"]`;
  await page.waitForFunction(([sel, n]) => {
    const r = document.querySelector(sel);
    return r && r.dataset.rounds === n;
  }, [row, rounds], { timeout: 60000 });
  const points = (cls) => page.getAttribute(`${row} polyline.${cls}`, "data-points").catch(() => null);
  say({ stage: "result", rows: await page.locator("#trainings tbody tr").count(),
        rounds: await page.getAttribute(row, "data-rounds"), state: await page.textContent(`${row} td.state`),
        loss_points: Number(await points("loss")), accuracy_points: await points("accuracy"),
        section_visible: await page.isVisible("#trainings-section"), console_errors: consoleErrors,
        page_errors: pageErrors });
} catch (e) {
  say({ stage: "result", error: String(e).slice(0, 500), console_errors: consoleErrors, page_errors: pageErrors });
}
await context.close();
fs.rmSync(profile, { recursive: true, force: true });
