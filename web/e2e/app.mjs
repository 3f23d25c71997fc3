// Drives the web app in a real Chromium (Debian's, through playwright-core) against a running
// Proctor: sign in, the jobs list, a job, one of its traces, both themes, sign out. axe-core
// audits every page; a screenshot of each lands in $SHOTS. Run by cmd/proctor's TestWebApp,
// which starts `proctor dev` and a job first. Prints one JSON line; exits 1 on a failure.
import { chromium } from "playwright-core";
import fs from "node:fs";

const { PROCTOR_URL, PROCTOR_KEY, JOB_ID, JOB_NAME, CHROMIUM, SHOTS, LONG_TRACE, LONG_EVENTS } = process.env;
const axeSource = fs.readFileSync(new URL("../node_modules/axe-core/axe.min.js", import.meta.url), "utf8");
const failures = [];
const timings = {};
const fail = (msg) => failures.push(msg);

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
page.on("pageerror", (e) => fail(`page error: ${e.message}`));
page.on("console", (m) => {
  // The browser reports every 4xx answer; the app expects some (401 signed out, 404 unpublished).
  if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) fail(`console error: ${m.text()}`);
});

async function audit(name) {
  // Evaluated over the DevTools protocol: the app's CSP (rightly) refuses inline scripts.
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(axeSource);
  const result = await page.evaluate(async () => await window.axe.run(document, { resultTypes: ["violations"] }));
  for (const v of result.violations) {
    if (v.impact === "serious" || v.impact === "critical") fail(`${name}: axe ${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
  }
  await page.screenshot({ path: `${SHOTS}/${name}.png` });
}

async function step(name, fn) {
  const start = Date.now();
  try {
    await fn();
  } catch (e) {
    fail(`${name}: ${e.message.split("\n").slice(0, 3).join(" ")} (at ${page.url()}; see ${name}-failed.png)`);
    await page.screenshot({ path: `${SHOTS}/${name}-failed.png` }).catch(() => {});
  }
  timings[name] = Date.now() - start;
}

const heading = (name) => page.getByRole("heading", { level: 1, name });

await step("signin", async () => {
  await page.goto(`${PROCTOR_URL}/`);
  await heading("Sign in").waitFor({ timeout: 10000 });
  // Keyboard: the first Tab reaches the skip link.
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => document.activeElement?.textContent);
  if (focused !== "Skip to content") fail(`the first Tab focuses ${JSON.stringify(focused)}, want the skip link`);
  await audit("signin");
  await page.getByLabel("API key").fill("pk_wrong_key");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").waitFor({ timeout: 5000 });
});

await step("jobs", async () => {
  await page.getByLabel("API key").fill(PROCTOR_KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await heading("Jobs").waitFor({ timeout: 10000 });
  await page.getByRole("link", { name: JOB_NAME }).waitFor({ timeout: 10000 });
  await audit("jobs");
  // Filtered by a taskset with no jobs yet, the list is empty; back to all, the job is there.
  await page.getByLabel("Taskset").selectOption({ label: "live-demo" });
  await page.getByText("No jobs yet.").waitFor({ timeout: 10000 });
  await page.getByLabel("Taskset").selectOption({ label: "demo" });
  await page.getByRole("link", { name: JOB_NAME }).waitFor({ timeout: 10000 });
});

let traceHref = "";
await step("job", async () => {
  await page.getByRole("link", { name: JOB_NAME }).click();
  await heading(JOB_NAME).waitFor({ timeout: 10000 });
  await page.getByRole("img", { name: "Reward histogram of 3 attempts" }).waitFor({ timeout: 10000 });
  await page.getByText("Models: oracle").waitFor({ timeout: 10000 });
  await page.getByRole("tab", { name: "successful (3)" }).click();
  const first = page.getByRole("tabpanel").getByRole("link").first();
  await first.waitFor({ timeout: 10000 });
  traceHref = await first.getAttribute("href");
  await audit("job");
  await page.getByRole("button", { name: "Publish" }).click();
  await page.getByText("published: anyone with the link can open it").waitFor({ timeout: 10000 });
});

await step("trace", async () => {
  await page.goto(`${PROCTOR_URL}/${traceHref}`);
  await page.getByTestId("reward").filter({ hasText: "1.000" }).waitFor({ timeout: 15000 });
  const kinds = await page.locator(".timeline .kind").allTextContents();
  if (!kinds.includes("evaluate") || !kinds.includes("tool call")) fail(`trace timeline kinds: ${kinds.join(", ")}`);
  await audit("trace");
  await page.getByRole("tab", { name: "Runner logs" }).click();
  await page.getByText("planned: queue").first().waitFor({ timeout: 10000 });
  await page.getByRole("tab", { name: "Environment logs" }).click();
  await page.getByRole("tabpanel").locator("pre, p").first().waitFor({ timeout: 10000 });
  await audit("trace-env-logs");
  await page.getByRole("tab", { name: "Related attempts" }).click();
  await page.getByRole("heading", { name: "The same job" }).waitFor({ timeout: 10000 });
  const related = await page.getByRole("tabpanel").getByRole("link").count();
  if (related < 2) fail(`related attempts: ${related} links, want the job's other two attempts at least`);
  await page.getByRole("tab", { name: /Timeline/ }).click();
  await page.getByRole("button", { name: "Dark theme" }).click();
  await audit("trace-dark");
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  await heading("Jobs").waitFor();
  await audit("jobs-dark");
  await page.getByRole("button", { name: "Light theme" }).click();
});

let unpublishedJob = "";
await step("launch", async () => {
  await page.getByRole("link", { name: "Tasksets", exact: true }).click();
  await heading("Tasksets").waitFor({ timeout: 10000 });
  await audit("tasksets");
  await page.getByRole("link", { name: "demo", exact: true }).click();
  await heading("demo").waitFor({ timeout: 10000 });
  await audit("taskset");
  await page.getByLabel("Model").selectOption({ label: "oracle" });
  await page.getByRole("button", { name: "Run 3 tasks" }).click();
  // The job page follows the job live until its attempts end at 1.0.
  await page.getByRole("heading", { level: 1, name: /demo/ }).waitFor({ timeout: 10000 });
  await page.getByRole("tab", { name: "successful (3)" }).waitFor({ timeout: 30000 });
  unpublishedJob = page.url().split("/").pop();
  await page.getByRole("tab", { name: "successful (3)" }).click();
  await page.getByRole("tabpanel").getByRole("link").first().click();
  await page.getByTestId("reward").filter({ hasText: "1.000" }).waitFor({ timeout: 15000 });
});

await step("live", async () => {
  // A slow model's attempt, followed live from its job page to its reward.
  await page.getByRole("link", { name: "Tasksets", exact: true }).click();
  await page.getByRole("link", { name: "live-demo", exact: true }).click();
  await page.getByLabel("Model").selectOption({ label: "slow" });
  await page.getByRole("button", { name: "Run 1 tasks" }).click();
  await page.getByRole("tab", { name: "live (1)" }).click();
  await page.getByRole("tabpanel").getByRole("link").first().click();
  await page.getByText("following live").waitFor({ timeout: 10000 });
  await audit("trace-live");
  await page.getByTestId("reward").filter({ hasText: "1.000" }).waitFor({ timeout: 30000 });
  await page.getByText("following live").waitFor({ state: "detached", timeout: 10000 });
  const calls = await page.locator(".timeline .event-tool_call").count();
  if (calls !== 2) fail(`the live trace shows ${calls} tool calls, want 2`);
});

await step("long-trace", async () => {
  // A trace of about 1,000 events renders within a second of opening it.
  const want = Number(LONG_EVENTS);
  for (const run of [1, 2]) {
    await page.goto(`${PROCTOR_URL}/#/jobs`);
    await heading("Jobs").waitFor();
    const start = Date.now();
    await page.goto(`${PROCTOR_URL}/#/traces/${LONG_TRACE}`);
    await page.waitForFunction((n) => document.querySelectorAll(".timeline > li").length >= n, want, { timeout: 10000 });
    timings[`long-trace-${run}`] = Date.now() - start;
  }
  if (timings["long-trace-2"] > 1000) fail(`a ${want}-event trace took ${timings["long-trace-2"]} ms to render, want under 1 s`);
  await audit("trace-long");
});

await step("task", async () => {
  await page.getByRole("link", { name: "Tasksets", exact: true }).click();
  await page.getByRole("link", { name: "demo", exact: true }).click();
  await page.getByRole("link", { name: "todo-add", exact: true }).click();
  await heading("todo-add").waitFor({ timeout: 10000 });
  await page.getByLabel("Stage", { exact: true }).selectOption("qa");
  await page.getByRole("button", { name: "Move to this stage" }).click();
  await page.getByText("stage qa ·").waitFor({ timeout: 10000 });
  await page.getByRole("button", { name: "Mark ready" }).click();
  await page.getByText("review ready").waitFor({ timeout: 10000 });
  await audit("task");
  await page.getByRole("tab", { name: /Comments/ }).click();
  await page.getByLabel(/Comment \(mention/).fill("@dev the list should also hold a third item");
  await page.getByRole("button", { name: "Comment", exact: true }).click();
  await page.getByText("@dev the list should also hold a third item").waitFor({ timeout: 10000 });
  await audit("task-comments");
  await page.getByRole("tab", { name: /Activity/ }).click();
  await page.getByRole("tabpanel").getByRole("listitem").first().waitFor({ timeout: 10000 });
  await page.getByRole("tab", { name: /Brief/ }).click();
  await page.getByLabel("Attach a file (up to 32 MiB)").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("milk, then the dog\n") });
  await page.getByRole("button", { name: "Attach", exact: true }).click();
  await page.getByRole("list", { name: "Attachments" }).getByText("notes.txt").waitFor({ timeout: 10000 });
  await audit("task-brief");
  // Attaching wrote version 2, which names the file.
  await page.getByRole("tab", { name: "Versions (2)" }).click();
  await page.getByText("version 2 of 2 (latest) ·").waitFor({ timeout: 10000 });
  await page.getByText("version 1 of 2 ·").waitFor({ timeout: 10000 });
  await page.getByRole("tab", { name: "Ready check" }).click();
  await page.getByRole("tabpanel").getByText(/ready/i).first().waitFor({ timeout: 10000 });
});

await step("environment", async () => {
  await page.getByRole("link", { name: "Environments", exact: true }).click();
  await heading("Environments").waitFor({ timeout: 10000 });
  // The list counts each environment's scenarios (the latest build's).
  const todoRow = page.getByRole("row").filter({ has: page.getByRole("link", { name: "todo", exact: true }) });
  await todoRow.waitFor({ timeout: 10000 });
  const todoCells = await todoRow.getByRole("cell").allTextContents();
  if (!(Number(todoCells[2]) > 0)) fail(`the todo environment's Scenarios cell reads ${JSON.stringify(todoCells[2])}, want its scenarios counted`);
  await audit("environments");
  await page.getByRole("link", { name: "todo", exact: true }).click();
  await heading("todo").waitFor({ timeout: 10000 });
  await page.getByRole("cell", { name: "add-todos", exact: true }).waitFor({ timeout: 10000 });
  await audit("environment");
  // The tools the latest build serves.
  await page.getByRole("tab", { name: /^Tools \(\d+\)$/ }).click();
  await page.getByRole("table", { name: "Tools of the latest build" }).getByRole("cell", { name: "add_todo", exact: true }).waitFor({ timeout: 10000 });
  await audit("environment-tools");
  await page.getByRole("tab", { name: /Builds/ }).click();
  await page.getByLabel("Build log").filter({ hasText: "stored" }).waitFor({ timeout: 10000 });
  await page.getByRole("list", { name: "Builds" }).getByText("latest: new runs use it").waitFor({ timeout: 10000 });
  await audit("environment-build");
  await page.getByRole("tab", { name: "Source" }).click();
  const files = page.getByRole("list", { name: "Files" });
  for (const dir of ["examples/", "environments/", "todo/"]) {
    await files.getByRole("button", { name: dir, exact: true }).click();
  }
  await files.getByRole("button", { name: "main.go", exact: true }).click();
  await page.getByLabel("Contents of examples/environments/todo/main.go").filter({ hasText: "package main" }).waitFor({ timeout: 10000 });
  await audit("environment-source");
});

await step("account", async () => {
  await page.getByRole("link", { name: "Models", exact: true }).click();
  await heading("Models").waitFor({ timeout: 10000 });
  await page.getByRole("cell", { name: "oracle", exact: true }).waitFor({ timeout: 10000 });
  await audit("models");
  await page.getByRole("link", { name: "Secrets", exact: true }).click();
  await heading("Secrets").waitFor({ timeout: 10000 });
  await page.getByLabel("Name", { exact: true }).fill("GITHUB_TOKEN");
  await page.getByLabel("Value", { exact: true }).fill("ghp_0123456789abcdef");
  await page.getByRole("button", { name: "Save the secret" }).click();
  await page.getByRole("cell", { name: "GITHUB_TOKEN", exact: true }).waitFor({ timeout: 10000 });
  if ((await page.content()).includes("ghp_0123456789abcdef")) fail("the secret's value is on the page after saving");
  await page.getByLabel("API key", { exact: true }).fill("sk-test-0123456789abcdefghij");
  await page.getByRole("button", { name: "Save the provider key" }).click();
  await page.getByRole("button", { name: "Delete the personal openai key" }).waitFor({ timeout: 10000 });
  if ((await page.content()).includes("sk-test-0123456789abcdefghij")) fail("the provider key is on the page after saving");
  await audit("secrets");
  await page.getByRole("link", { name: "Usage", exact: true }).click();
  await heading("Limits and usage").waitFor({ timeout: 10000 });
  await page.getByText("Model calls").waitFor({ timeout: 10000 });
  await audit("usage");
});

await step("signout", async () => {
  await page.getByRole("button", { name: "Sign out" }).click();
  await heading("Sign in").waitFor({ timeout: 10000 });
  // A published job and its traces open signed out; an unpublished one asks to sign in.
  await page.goto(`${PROCTOR_URL}/#/jobs/${JOB_ID}`);
  await heading(JOB_NAME).waitFor({ timeout: 10000 });
  await page.getByRole("img", { name: "Reward histogram of 3 attempts" }).waitFor({ timeout: 10000 });
  await audit("published-job-signed-out");
  await page.goto(`${PROCTOR_URL}/${traceHref}`);
  await page.getByTestId("reward").filter({ hasText: "1.000" }).waitFor({ timeout: 10000 });
  await page.goto(`${PROCTOR_URL}/#/jobs/${unpublishedJob}`);
  await page.getByText("This job is not published.").waitFor({ timeout: 10000 });
  await page.goto(`${PROCTOR_URL}/#/tasksets`);
  await heading("Sign in").waitFor({ timeout: 10000 });
});

await browser.close();
console.log(JSON.stringify({ ok: failures.length === 0, failures, timings }));
process.exit(failures.length === 0 ? 0 : 1);
