// Drives the web app in a real Chromium (Debian's, through playwright-core) against a running
// Proctor: sign in, the jobs list, @mentions, a job, one of its traces, both themes, sign out.
// axe-core audits every page; a screenshot of each lands in $SHOTS. Run by cmd/proctor's
// TestWebApp, which starts `proctor dev` and a job first. Prints one JSON line; exits 1 on a
// failure.
import { chromium } from "playwright-core";
import fs from "node:fs";

const { PROCTOR_URL, PROCTOR_KEY, JOB_ID, JOB_NAME, CHROMIUM, SHOTS, LONG_TRACE, LONG_EVENTS, LONG_STEPS, SHOT_KEY, ERR_JOB, BOB_KEY, MENTION_TASK, MENTION_TASK_NAME, MENTION_TASKSET } =
  process.env;
const axeSource = fs.readFileSync(new URL("../node_modules/axe-core/axe.min.js", import.meta.url), "utf8");
const failures = [];
const timings = {};
// What the long trace measures: time to open it and to interact with it, scrolling through it.
const longTrace = {};
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
    await page.screenshot({ path: `${SHOTS}/${name}-failed.png`, fullPage: true }).catch(() => {});
  }
  timings[name] = Date.now() - start;
}

const heading = (name) => page.getByRole("heading", { level: 1, name });
const attemptRows = () => page.getByRole("table", { name: "Attempts", exact: true }).locator("tbody tr");
const stepRows = () => page.locator(".steps > li");

// untilJobEnds waits, through the API, until every attempt of a job has ended. It fails only
// after two minutes in which the job's summary did not change (the Go tests' stall window,
// testenv.StallWindow), never on a fixed deadline: on a loaded machine the platform is slow, not
// stuck. The page's own waits then need only the time to render what it follows live.
async function untilJobEnds(jobId) {
  let last = "";
  let since = Date.now();
  for (;;) {
    const r = await fetch(`${PROCTOR_URL}/v2/jobs/${jobId}/summary`, { headers: { Authorization: `Bearer ${PROCTOR_KEY}` } });
    if (!r.ok) throw new Error(`GET /v2/jobs/${jobId}/summary = ${r.status}`);
    const sum = await r.json();
    if (sum.total_traces > 0 && sum.completed + sum.error + sum.cancelled === sum.total_traces) return sum;
    const now = JSON.stringify(sum);
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since > 120000) {
      throw new Error(`job ${jobId} made no progress for 2 minutes: ${now}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

// waitCount waits until locator matches n elements (a filter renders after the input event),
// and fails with the count it saw instead.
async function waitCount(what, locator, n, timeout = 5000) {
  const end = Date.now() + timeout;
  let c = await locator.count();
  while (c !== n && Date.now() < end) {
    await page.waitForTimeout(50);
    c = await locator.count();
  }
  if (c !== n) fail(`${what}: ${c}, want ${n}`);
}

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
  // The errored job says so: a badge with its errors, and the errors column.
  const errRow = page.getByRole("row").filter({ has: page.locator(`a[href="#/jobs/${ERR_JOB}"]`) });
  await errRow.getByText("completed · 4 errors").waitFor({ timeout: 10000 });
  const errCells = await errRow.getByRole("cell").allTextContents();
  // Cells: compare, job, agent, model, status, progress, errors, mean reward, cost, duration …
  if (errCells[6] !== "4") fail(`the errored job's Errors cell reads ${JSON.stringify(errCells[6])}, want "4" (row: ${errCells.join(" | ")})`);
  const demoCells = await page.getByRole("row").filter({ has: page.getByRole("link", { name: JOB_NAME }) }).getByRole("cell").allTextContents();
  if (demoCells[2] !== "built-in" || demoCells[3] === "" || demoCells[4] !== "completed" || demoCells[6] !== "0" || !/\d/.test(demoCells[9])) {
    fail(`the demo job's row reads ${demoCells.join(" | ")}, want the built-in agent, its model, completed with 0 errors and a duration`);
  }
  await audit("jobs");
  // Sorted by errors, the errored job comes first; filtered by a name, only that job is left.
  await page.getByRole("button", { name: "Errors" }).click();
  await page.waitForFunction((id) => document.querySelector("tbody tr a")?.getAttribute("href") === `#/jobs/${id}`, ERR_JOB, { timeout: 5000 })
    .catch(() => fail("sorted by errors, the errored job is not first"));
  await page.getByLabel("Filter jobs").fill(JOB_NAME);
  await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 1, null, { timeout: 5000 })
    .catch(() => fail(`filtered by ${JOB_NAME}, the list does not hold that job alone`));
  await page.getByLabel("Filter jobs").fill("");
  await page.getByRole("button", { name: /^Created/ }).click();
  // Filtered by a taskset with no jobs yet, the list is empty; back to all, the job is there.
  await page.getByLabel("Taskset").selectOption({ label: "live-demo" });
  await page.getByText("No jobs yet.").waitFor({ timeout: 10000 });
  await page.getByLabel("Taskset").selectOption({ label: "demo" });
  await page.getByRole("link", { name: JOB_NAME }).waitFor({ timeout: 10000 });
});

await step("mentions", async () => {
  // Bob's two-line comment names the signed-in member: the header counts it, the page shows it,
  // unread, with a link to its task.
  await page.getByRole("link", { name: "Mentions (1)", exact: true }).click();
  await heading("Mentions").waitFor({ timeout: 10000 });
  const items = page.getByRole("list", { name: "Mentions, newest first" }).getByRole("listitem");
  await waitCount("mentions", items, 1, 10000);
  const item = items.first();
  const head = await item.locator(".inline span").first().textContent();
  if (head !== `Bob mentioned you on ${MENTION_TASK_NAME}`) fail(`the mention reads ${JSON.stringify(head)}, want Bob on ${MENTION_TASK_NAME}`);
  const taskHref = await item.getByRole("link", { name: MENTION_TASK_NAME, exact: true }).getAttribute("href");
  if (taskHref !== `#/tasksets/${MENTION_TASKSET}/tasks/${MENTION_TASK}`) fail(`the mention links to ${taskHref}, want its task's page`);
  const comment = await item.locator("p").innerText();
  if (comment !== "@dev please check this\nthe second line stays a line") fail(`the mention's comment shows as ${JSON.stringify(comment)}, want its two lines`);
  await item.getByText("unread", { exact: true }).waitFor({ timeout: 5000 });
  await item.getByRole("button", { name: `Mark read: Bob on ${MENTION_TASK_NAME}` }).waitFor({ timeout: 5000 });
  await audit("mentions");
  // Mark all read: no count in the header, nothing marked unread.
  await page.getByRole("button", { name: "Mark all read" }).click();
  await page.getByRole("link", { name: "Mentions", exact: true }).waitFor({ timeout: 10000 });
  await page.getByText("All read.").waitFor({ timeout: 10000 });
  await waitCount("unread marks after marking all read", item.getByText("unread", { exact: true }), 0);
  await audit("mentions-read");
  // A new mention comes first; opening its task marks it read.
  const r = await fetch(`${PROCTOR_URL}/v2/tasks/${MENTION_TASK}/comments`, {
    method: "POST",
    headers: { Authorization: `Bearer ${BOB_KEY}`, "Content-Type": "application/json" },
    body: JSON.stringify({ body: "@dev and this one too" }),
  });
  if (!r.ok) fail(`Bob's second comment = ${r.status}`);
  await page.reload();
  await page.getByRole("link", { name: "Mentions (1)", exact: true }).waitFor({ timeout: 10000 });
  await waitCount("mentions after Bob's second", items, 2, 10000);
  const newest = items.first();
  if (!(await newest.locator("p").innerText()).includes("and this one too")) fail("the newest mention is not listed first");
  await newest.getByRole("link", { name: MENTION_TASK_NAME, exact: true }).click();
  await heading(MENTION_TASK_NAME).waitFor({ timeout: 10000 });
  await page.getByRole("link", { name: "Mentions", exact: true }).waitFor({ timeout: 10000 });
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  await heading("Jobs").waitFor({ timeout: 10000 });
});

let traceHref = "";
// A completed attempt of the todo environment, whose evaluation says how many todos exist.
let todoTraceHref = "";
await step("job", async () => {
  await page.getByRole("link", { name: JOB_NAME }).click();
  await heading(JOB_NAME).waitFor({ timeout: 10000 });
  await page.getByRole("img", { name: "Reward histogram of 3 attempts" }).waitFor({ timeout: 10000 });
  await page.getByText("Models: oracle").waitFor({ timeout: 10000 });
  // Which build of each environment ran, read from one attempt of each.
  const envs = page.getByTestId("environments");
  await envs.filter({ hasText: /environment todo: build 1 \(sha256:[0-9a-f]{12}…\)/ }).waitFor({ timeout: 10000 });
  await envs.filter({ hasText: /environment game2048: build 1 \(sha256:[0-9a-f]{12}…\)/ }).waitFor({ timeout: 10000 });
  // No errors or failures: the page opens on the successful attempts.
  await page.getByRole("tab", { name: "successful (3)", selected: true }).waitFor({ timeout: 10000 });
  const first = page.getByRole("tabpanel").getByRole("link").first();
  await first.waitFor({ timeout: 10000 });
  traceHref = await first.getAttribute("href");
  await waitCount("the demo job's attempts", attemptRows(), 3);
  // A task's row shows its attempts.
  await page.getByRole("button", { name: "Show the 1 attempt of todo-add" }).click();
  await page.getByRole("tab", { name: "all (3)", selected: true }).waitFor({ timeout: 5000 });
  await waitCount("todo-add's attempts", attemptRows(), 1);
  const task = await attemptRows().first().getByRole("cell").nth(1).textContent();
  if (task !== "todo-add") fail(`the task filter shows an attempt of ${task}, want todo-add`);
  todoTraceHref = await attemptRows().first().getByRole("link").first().getAttribute("href");
  await audit("job");
  await page.getByRole("button", { name: "Clear filters" }).click();
  await waitCount("the demo job's attempts, unfiltered", attemptRows(), 3);
  await page.getByRole("button", { name: "Publish" }).click();
  await page.getByText("published: anyone with the link can open it").waitFor({ timeout: 10000 });
});

await step("errors", async () => {
  await page.goto(`${PROCTOR_URL}/#/jobs/${ERR_JOB}`);
  // Four of six attempts errored: the page opens on them, with the errors grouped by message.
  await page.getByRole("tab", { name: "errors (4)", selected: true }).waitFor({ timeout: 10000 });
  await page.getByText("completed · 4 errors").first().waitFor({ timeout: 5000 });
  const groups = page.getByRole("table", { name: "Errors, by message" }).locator("tbody tr");
  await waitCount("error groups", groups, 2);
  const counts = await groups.evaluateAll((rows) => rows.map((r) => r.cells[0].textContent));
  if (counts.join(",") !== "2,2") fail(`error group counts ${counts}, want 2,2`);
  const text = await page.getByRole("table", { name: "Errors, by message" }).textContent();
  if (!text.includes("maximum context length") || !text.includes("add-todos")) fail(`the error groups do not name both errors: ${text}`);
  // Errors are not rewards: the histogram counts the two completed attempts (the oracle has no
  // validation calls to replay for this task: reward 0), not the errors the API records at 0.
  await page.getByRole("img", { name: "Reward histogram of 2 attempts" }).waitFor({ timeout: 5000 });
  const bins = await page.locator("g.bin").evaluateAll((gs) => gs.map((g) => [g.dataset.reward, g.dataset.count, g.querySelector("text").textContent]));
  const nonEmpty = bins.filter((b) => b[1] !== "0");
  if (nonEmpty.length !== 1 || nonEmpty[0][0] !== "0.0" || nonEmpty[0][1] !== "2" || nonEmpty[0][2] !== "0.0") fail(`histogram bins ${JSON.stringify(nonEmpty)}, want 2 at 0.0 under the label 0.0`);
  if (bins.length !== 11 || bins[10][2] !== "1.0") fail(`histogram labels ${bins.map((b) => b[2])}, want 0.0 to 1.0`);
  await page.getByText("4 errored attempts are left out").waitFor({ timeout: 5000 });
  await waitCount("errored attempts", attemptRows(), 4);
  await audit("job-errors");
  // A group's button shows its attempts only.
  await page.getByRole("button", { name: /^Show 2 attempts of the error: .*maximum context length/ }).click();
  await waitCount("the model error's attempts", attemptRows(), 2);
  for (const e of await attemptRows().locator("td.error-cell").allTextContents()) {
    if (!e.includes("maximum context length")) fail(`the model error's group shows an attempt that ended with ${e}`);
  }
  await page.getByRole("button", { name: "Clear filters" }).click();
  await waitCount("errored attempts, unfiltered", attemptRows(), 4);
  // Error text narrows the rows, and so does a text no error has.
  await page.getByLabel("Error contains").fill("Add-Todos");
  await waitCount("attempts whose error contains add-todos", attemptRows(), 2);
  await page.getByLabel("Error contains").fill("no such error text");
  await waitCount("attempts whose error contains an unknown text", attemptRows(), 0);
  await page.getByText("0 of 4 attempts").waitFor({ timeout: 5000 });
  await page.getByRole("button", { name: "Clear filters" }).click();
  // Every attempt; a reward range keeps the scored ones in it, never the errors.
  await page.getByRole("tab", { name: "all (6)" }).click();
  await waitCount("all attempts", attemptRows(), 6);
  await page.getByLabel("Reward from").fill("0.5");
  await waitCount("attempts with a reward of 0.5 or more", attemptRows(), 0);
  await page.getByLabel("Reward from").fill("");
  await page.getByLabel("to", { exact: true }).fill("0.5");
  await waitCount("attempts with a reward of 0.5 or less (errors have none)", attemptRows(), 2);
  await page.getByLabel("to", { exact: true }).fill("");
  await page.getByLabel("Status").selectOption("completed");
  await waitCount("completed attempts", attemptRows(), 2);
  await page.getByLabel("Status").selectOption("");
  const stops = (await page.getByLabel("Stop reason").locator("option").allTextContents()).filter((o) => o !== "any");
  if (stops.length === 0) fail("no stop reason to filter by");
  for (const stop of stops) {
    await page.getByLabel("Stop reason").selectOption(stop);
    await page.waitForTimeout(100);
    const cells = await attemptRows().evaluateAll((rows) => rows.map((r) => r.cells[3].textContent));
    if (cells.length === 0 || cells.some((c) => c !== stop)) fail(`stop reason ${stop} shows rows stopped at ${cells}`);
  }
  await page.getByLabel("Stop reason").selectOption("");
  // Each row: a short id that links to the attempt, its duration.
  const row = await attemptRows().first().getByRole("cell").allTextContents();
  if (!/^[0-9a-f]{8}$/.test(row[0]) || !/\d( ms| s|min)/.test(row[6])) fail(`an attempt row reads ${row.join(" | ")}, want a short id and a duration`);
  // An errored attempt's trace jumps to its error.
  await page.getByRole("tab", { name: "errors (4)" }).click();
  await attemptRows().first().getByRole("link").click();
  await page.getByRole("button", { name: "Jump to error" }).click();
  const at = await page.evaluate(() => document.activeElement?.id || document.activeElement?.closest(".step-error")?.id || document.activeElement?.tagName);
  if (!(at === "trace-error" || at?.startsWith("step-"))) fail(`jump to error focused ${at}, want the error`);
  await audit("trace-error");
});

await step("trace", async () => {
  await page.goto(`${PROCTOR_URL}/${todoTraceHref}`);
  await page.getByTestId("reward").filter({ hasText: "1.000" }).waitFor({ timeout: 15000 });
  const kinds = await page.locator(".steps .kind").allTextContents();
  if (!kinds.includes("evaluate") || !kinds.some((k) => /^step \d+$/.test(k))) fail(`trace rows: ${kinds.join(", ")}`);
  // The environment and the build that ran, linked to the environment's page.
  const env = page.getByTestId("environment");
  await env.filter({ hasText: /^environment todo · build 1 · sha256:[0-9a-f]{12}…$/ }).waitFor({ timeout: 10000 });
  const envHref = await env.getByRole("link", { name: "todo", exact: true }).getAttribute("href");
  if (!envHref?.startsWith("#/environments/")) fail(`the trace's environment links to ${envHref}, want its environment page`);
  // Why the reward is what it is, beside it, unopened; and in the evaluate row's summary.
  const evaluation = page.getByTestId("evaluation");
  await evaluation.filter({ hasText: /^\d+ of \d+ todos present$/ }).waitFor({ timeout: 10000 });
  const words = await evaluation.textContent();
  const header = await page.getByTestId("reward").locator("..").textContent();
  if (!header.includes(`reward 1.000 (${words})`)) fail(`the trace's header reads ${JSON.stringify(header)}, want the evaluation's words beside the reward`);
  const summary = await page.locator(".steps > li.step-evaluate .step-summary").first().textContent();
  if (!summary.includes(`→ reward 1: ${words}`)) fail(`the evaluate row reads ${JSON.stringify(summary)}, want the evaluation's words ${JSON.stringify(words)} after its reward`);
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
let liveJob = "";
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
  await page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/, { timeout: 10000 });
  unpublishedJob = page.url().split("/").pop();
  await untilJobEnds(unpublishedJob);
  await page.getByRole("tab", { name: "successful (3)" }).waitFor({ timeout: 15000 });
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
  liveJob = page.url().split("/").pop();
  await page.getByRole("tabpanel").getByRole("link").first().click();
  await page.getByText("following live").waitFor({ timeout: 10000 });
  await audit("trace-live");
  await untilJobEnds(liveJob);
  await page.getByTestId("reward").filter({ hasText: "1.000" }).waitFor({ timeout: 15000 });
  await page.getByText("following live").waitFor({ state: "detached", timeout: 10000 });
  const calls = await page.locator(".steps .call").count();
  if (calls !== 2) fail(`the live trace shows ${calls} tool calls, want 2`);
});

await step("compare", async () => {
  // The errored job's two scored attempts of add-two ended at 0; the live one at 1: ticked on the
  // jobs page, the comparison pairs them, marks the task gained, and opens both traces side by side.
  await page.getByRole("link", { name: "Jobs", exact: true }).click();
  await heading("Jobs").waitFor({ timeout: 10000 });
  for (const id of [liveJob, ERR_JOB]) await page.locator(`tr:has(a[href="#/jobs/${id}"]) input[type="checkbox"]`).check();
  await page.getByRole("link", { name: /^Compare .* with / }).click();
  await heading("Comparison").waitFor({ timeout: 10000 });
  if (!page.url().endsWith(`#/compare/${ERR_JOB}/${liveJob}`)) fail(`the comparison opened at ${page.url()}, want the older job as A`);
  const row = page.getByRole("row").filter({ has: page.getByRole("cell", { name: "add-two", exact: true }) });
  await row.waitFor({ timeout: 10000 });
  const cells = await row.getByRole("cell").allTextContents();
  if (cells.slice(0, 5).join("|") !== "add-two|0.000 (2)|1.000 (1)|+1.000|gained") fail(`the add-two row reads ${JSON.stringify(cells)}`);
  await page.getByTestId("means").filter({ hasText: "difference +1.000" }).waitFor({ timeout: 5000 });
  await page.getByText("4 left out").waitFor({ timeout: 5000 });
  await audit("compare");
  await row.getByRole("link", { name: "Traces side by side" }).click();
  for (const [side, reward] of [["Attempt A", "0.000"], ["Attempt B", "1.000"]]) {
    await page.getByRole("region", { name: side }).getByTestId("reward").filter({ hasText: reward }).waitFor({ timeout: 10000 });
  }
  await audit("compare-traces");
});

await step("long-trace", async () => {
  // A trace of about 1,000 events opens (its time reported), one row per step, and answers at once.
  const want = Number(LONG_STEPS);
  for (const run of [1, 2]) {
    await page.goto(`${PROCTOR_URL}/#/jobs`);
    await heading("Jobs").waitFor();
    const start = Date.now();
    await page.goto(`${PROCTOR_URL}/#/traces/${LONG_TRACE}`);
    await page.waitForFunction((n) => document.querySelectorAll(".steps > li").length >= n, want, { timeout: 10000 });
    longTrace[`open_ms_${run}`] = Date.now() - start;
    // Interactive: a click on "Jump to end" lands on the last row.
    longTrace[`jump_to_end_ms_${run}`] = await timeRender({ click: "Jump to end", until: "last-row-focused" });
    longTrace[`interactive_ms_${run}`] = Date.now() - start;
  }
  timings["long-trace-2"] = longTrace.open_ms_2;
  // Its time is reported, not held to a bound: the suite shares two cores with the rest of CI
  // (a loaded run read 1,252 ms); the goal of under 1 s is measured on an idle machine.
  await waitCount("rows of the long trace", stepRows(), want);
  const lastInView = await page.locator(".steps > li:last-child").evaluate((el) => {
    const r = el.getBoundingClientRect();
    return r.top < window.innerHeight && r.bottom > 0;
  });
  if (!lastInView) fail("jump to end: the last row is not in view");
  if (await page.evaluate(() => document.activeElement?.closest(".steps > li") !== document.querySelector(".steps > li:last-child"))) fail("jump to end: the last row has not the focus");
  longTrace.scroll_collapsed = await measureScroll();
  await audit("trace-long");

  // Search filters the rows and marks the matches; the two-line argument shows as two lines.
  // (Rows of a try a loaded machine retried are shown too, marked superseded: they are left out.)
  const liveRows = () => page.locator(".steps > li:not(.superseded)");
  longTrace.search_ms = await timeRender({ search: "add_todo", until: [".steps > li", 10, "lt"] });
  const found = await liveRows().count();
  if (found < 1 || found > 3) fail(`searching add_todo shows ${found} rows, want the step that calls it (and the prompts that name it)`);
  const addRow = liveRows().filter({ has: page.locator(".call", { hasText: /^add_todo\(/ }) });
  await waitCount("rows that call add_todo", addRow, 1);
  await addRow.locator("mark").first().waitFor({ timeout: 5000 });
  await addRow.locator(".step-head").click();
  const details = page.locator(".steps > li .step-details").first();
  await details.waitFor({ timeout: 5000 });
  const lines = await details.locator(".json .lines").allInnerTexts();
  if (!lines.some((l) => l.includes("line one\nline two"))) fail(`the two-line argument shows as ${JSON.stringify(lines)}, want two lines`);
  if ((await details.locator(".json").first().textContent()).includes("line one\\nline two")) fail("the two-line argument shows its line break escaped");
  await page.getByLabel("Search steps").fill("list_todos");
  await page.waitForFunction((n) => { const c = document.querySelectorAll(".steps > li").length; return c > 300 && c < n; }, want, { timeout: 5000 }).catch(() => fail("searching list_todos does not narrow the rows to the tool's steps"));
  // tool:NAME keeps the steps that call the tool, not the prompts that name it; the arrows go from
  // match to match, opening each.
  await page.getByLabel("Search steps").fill("tool:add_todo");
  await waitCount("rows of tool:add_todo", liveRows(), 1);
  await page.getByLabel("Search steps").fill("tool:list_todos kind:tool_result");
  await page.waitForFunction((n) => { const c = document.querySelectorAll(".steps > li").length; return c > 300 && c < n; }, want, { timeout: 5000 }).catch(() => fail("tool:list_todos kind:tool_result does not narrow the rows to the tool's steps"));
  for (let i = 0; i < 2; i++) await page.getByRole("button", { name: "Next match" }).click();
  await page.getByText(/ · match 2 of \d+/).waitFor({ timeout: 5000 }).catch(() => fail("the next-match arrow does not say which match it is on"));
  if (await page.locator(".steps > li").nth(1).locator('.step-head[aria-expanded="true"]').count() !== 1) fail("the second match is not opened by the arrow");
  await page.getByLabel("Search steps").fill("");
  await waitCount("rows after clearing the search", stepRows(), want);

  // The screenshot of a tool result shows inline, loaded from object storage.
  const digest = SHOT_KEY.split("/").pop().split(".")[0];
  const shot = page.locator(`.steps img[src*="${digest}"]`).first();
  await shot.scrollIntoViewIfNeeded();
  await page.waitForFunction((d) => [...document.querySelectorAll(".steps img")].some((i) => i.src.includes(d) && i.complete && i.naturalWidth === 48), digest, { timeout: 10000 })
    .catch(() => fail("the tool result's screenshot is not shown (not loaded, or not 48 px wide)"));
  const alt = await shot.getAttribute("alt");
  if (!alt || !alt.includes("image/png")) fail(`the screenshot's alt text is ${JSON.stringify(alt)}`);

  // Expand all, then collapse all, every row.
  longTrace.expand_all_ms = await timeRender({ click: "Expand all", until: ['.steps .step-head[aria-expanded="true"]', want] });
  await waitCount("expanded rows", page.locator('.steps .step-head[aria-expanded="true"]'), want, 15000);
  longTrace.scroll_expanded = await measureScroll();
  // Expanded, ten steps take under three screens: arrays and small objects stay on one line.
  longTrace.expanded_px_per_10_steps = Math.round((longTrace.scroll_expanded.height_px / want) * 10);
  if (longTrace.expanded_px_per_10_steps > 3 * 900) fail(`expanded, ten steps take ${longTrace.expanded_px_per_10_steps} px, over three 900 px screens`);
  longTrace.collapse_all_ms = await timeRender({ click: "Collapse all", until: ['.steps .step-head[aria-expanded="true"]', 0] });
  await waitCount("expanded rows after collapse all", page.locator('.steps .step-head[aria-expanded="true"]'), 0);
});

// timeRender clicks a button or types in the trajectory's search box, and measures in the page
// the time until the frame after until's selector matches its count is painted: what a reader
// waits between the action and the answer on screen.
async function timeRender(action) {
  return await page.evaluate(async ({ click, search, until }) => {
    const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    const start = performance.now();
    if (click) [...document.querySelectorAll("button")].find((b) => b.textContent === click).click();
    if (search !== undefined) {
      const input = document.querySelector('.trajectory-tools input[type="search"]');
      Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(input, search);
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }
    const done = () => {
      if (until === "last-row-focused") return document.activeElement?.closest(".steps > li") === document.querySelector(".steps > li:last-child");
      const n = document.querySelectorAll(until[0]).length;
      return until[2] === "lt" ? n < until[1] : n === until[1];
    };
    do await frame();
    while (!done() && performance.now() - start < 10000);
    return Math.round(performance.now() - start);
  }, action);
}

// measureScroll scrolls the page from top to bottom, 600 px a frame, and reports how long it took
// and its frames: a frame much longer than 17 ms is a stutter a reader sees.
async function measureScroll() {
  return await page.evaluate(async () => {
    window.scrollTo(0, 0);
    await new Promise((r) => requestAnimationFrame(() => r()));
    const frames = [];
    const start = performance.now();
    let last = start;
    // Rows off screen are laid out lazily (content-visibility), so the height settles as it goes.
    const max = () => document.documentElement.scrollHeight - window.innerHeight;
    while (window.scrollY < max() - 1 && frames.length < 2000) {
      window.scrollBy(0, 600);
      await new Promise((r) => requestAnimationFrame(() => r()));
      const now = performance.now();
      frames.push(now - last);
      last = now;
    }
    frames.sort((a, b) => a - b);
    return {
      height_px: document.documentElement.scrollHeight,
      ms: Math.round(last - start),
      frames: frames.length,
      p95_frame_ms: Math.round(frames[Math.floor(frames.length * 0.95)] ?? 0),
      max_frame_ms: Math.round(frames[frames.length - 1] ?? 0),
    };
  });
}

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
  const agentTools = page.getByRole("table", { name: "Tools of the latest build" });
  await agentTools.getByRole("cell", { name: "add_todo", exact: true }).waitFor({ timeout: 10000 });
  // Each tool's arguments, from its input schema.
  const title = await agentTools.getByRole("list", { name: "Arguments of add_todo" }).getByRole("listitem").allTextContents();
  if (title.length !== 1 || !/^title string required · what to do$/.test(title[0])) fail(`add_todo's arguments read ${JSON.stringify(title)}, want title, a required string`);
  for (const hidden of ["setup", "evaluate"]) {
    if (await agentTools.getByRole("cell", { name: hidden, exact: true }).count()) fail(`the ${hidden} dispatcher is listed among the tools agents call`);
    const row = page.getByRole("table", { name: "Hub dispatchers of the latest build" }).getByRole("row").filter({ has: page.getByRole("cell", { name: hidden, exact: true }) });
    await row.filter({ hasText: `${hidden}: hidden from agents` }).waitFor({ timeout: 5000 });
  }
  await audit("environment-tools");
  await page.getByRole("tab", { name: /Builds/ }).click();
  await page.getByLabel("Build log").filter({ hasText: "stored" }).waitFor({ timeout: 10000 });
  await page.getByRole("list", { name: "Builds" }).getByText("latest: new runs use it").waitFor({ timeout: 10000 });
  await page.getByText("Not certified:").waitFor({ timeout: 10000 });
  await audit("environment-build");
  // Certified (through the API), the build shows its figures per task.
  const call = async (method, path, body) => {
    const r = await fetch(`${PROCTOR_URL}${path}`, {
      method, headers: { Authorization: `Bearer ${PROCTOR_KEY}`, "Content-Type": "application/json" }, body: body && JSON.stringify(body),
    });
    if (!r.ok) fail(`${method} ${path} = ${r.status} ${await r.text()}`);
    return r.json();
  };
  const todoEnv = (await call("GET", "/v2/registry?search=todo")).items.find((e) => e.name === "todo");
  const demo = await call("GET", "/v2/tasksets/by-name/demo");
  const cert = await call("POST", `/v2/builds/${todoEnv.latest_build_id}/certify`, { taskset_id: demo.taskset_id, k: 1 });
  for (let i = 0; ; i++) {
    const now = await call("GET", `/v2/builds/${todoEnv.latest_build_id}/certification`);
    if (now.id === cert.id && now.status !== "running") break;
    if (i > 600) fail(`certification ${cert.id} still runs`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await page.reload();
  await page.getByRole("tab", { name: /Builds/ }).click();
  const certified = page.getByRole("region", { name: "Certification" });
  await certified.getByRole("cell", { name: "todo-add", exact: true }).waitFor({ timeout: 10000 });
  await certified.getByRole("link", { name: "its job" }).waitFor({ timeout: 5000 });
  await audit("environment-certification");
  // Checked against the demo job (through the API), the build shows each replayed attempt, and a
  // replay opens beside the attempt it replays.
  await page.getByText("Not checked against a job:").waitFor({ timeout: 10000 });
  const chk = await call("POST", `/v2/builds/${todoEnv.latest_build_id}/check`, { against_job_id: JOB_ID });
  for (let i = 0; ; i++) {
    const now = await call("GET", `/v2/builds/${todoEnv.latest_build_id}/check`);
    if (now.id === chk.id && now.status !== "running") {
      if (now.status !== "same") fail(`the demo job replayed on the build it ran reads ${now.status}: ${JSON.stringify(now.attempts)}`);
      break;
    }
    if (i > 600) fail(`replay check ${chk.id} still runs`);
    await new Promise((r) => setTimeout(r, 200));
  }
  await page.reload();
  await page.getByRole("tab", { name: /Builds/ }).click();
  const checked = page.getByRole("region", { name: "Replay check" });
  await checked.getByRole("cell", { name: "todo-add", exact: true }).waitFor({ timeout: 10000 });
  await checked.getByText("attempts not replayed (other_environment)").waitFor({ timeout: 5000 });
  await audit("environment-replay-check");
  await checked.getByRole("row").filter({ hasText: "todo-add" }).getByRole("link", { name: "Traces side by side" }).click();
  await page.getByText("A, the baseline").waitFor({ timeout: 10000 });
  await page.goBack();
  await page.getByRole("tab", { name: /Builds/ }).click();
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

await step("sign-in-link", async () => {
  // proctor open's link (POST /auth/link with the key, as the CLI asks): its page names the
  // account and signs in only when asked to, then opens the page the link names; used, it is
  // spent.
  const r = await fetch(`${PROCTOR_URL}/auth/link`, {
    method: "POST", headers: { Authorization: `Bearer ${PROCTOR_KEY}`, "Content-Type": "application/json" },
    body: JSON.stringify({ page: `jobs/${unpublishedJob}` }),
  });
  if (!r.ok) throw new Error(`POST /auth/link = ${r.status} ${await r.text()}`);
  const { url } = await r.json();
  await page.goto(url);
  await page.getByRole("heading", { name: "Sign in to Proctor" }).waitFor({ timeout: 10000 });
  await audit("sign-in-link");
  await page.getByRole("button", { name: /^Continue as / }).click();
  await page.waitForURL(`${PROCTOR_URL}/#/jobs/${unpublishedJob}`, { timeout: 10000 });
  await page.getByRole("heading", { level: 1, name: /demo/ }).waitFor({ timeout: 10000 });
  await page.goto(url);
  await page.getByRole("heading", { name: "This sign-in link cannot be used" }).waitFor({ timeout: 10000 });
});

await browser.close();
console.log(JSON.stringify({ ok: failures.length === 0, failures, timings, longTrace }));
process.exit(failures.length === 0 ? 0 : 1);
