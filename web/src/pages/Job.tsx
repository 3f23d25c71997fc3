import { useMemo, useRef, useState } from "react";
import { api, APIError, ok, Unauthorized, type Schemas } from "../api/client";
import { fmtReward, fmtTime, fmtUSD, shortDigest, terminalJob } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { Head, JobStatus } from "../ui";
import { type Attempt, Attempts, type Category, countCategories, ErrorGroups, type Filter, groupErrors, noFilter, usefulCategory } from "./JobAttempts";

type JobView = {
  job: Schemas["Job"];
  summary: Schemas["JobSummary"];
  coverage?: Schemas["CoverageOutputBody"];
  chart: Schemas["ChartDataOutputBody"];
  usage?: Schemas["JobUsageOutputBody"];
  links: Schemas["EntityLink"][];
};

/** signedOutOK turns a 401 into undefined: a published job opens signed out, without the parts
 * that need a member (its coverage and cost). */
function signedOutOK<T>(p: Promise<T>): Promise<T | undefined> {
  return p.catch((e) => {
    if (e instanceof Unauthorized) return undefined;
    throw e;
  });
}

async function loadJob(id: string): Promise<JobView> {
  const path = { job_id: id };
  const [job, summary, coverage, chart, usage, links] = await Promise.all([
    ok(api.GET("/v2/jobs/{job_id}", { params: { path } })),
    ok(api.GET("/v2/jobs/{job_id}/summary", { params: { path } })),
    signedOutOK(ok(api.GET("/v2/jobs/{job_id}/taskset-coverage", { params: { path } }))),
    ok(api.GET("/v2/jobs/{job_id}/chart-data", { params: { path, query: { limit: 5000 } } })),
    signedOutOK(ok(api.GET("/v2/jobs/{job_id}/usage", { params: { path } }))),
    ok(api.GET("/v2/jobs/{job_id}/entity-links", { params: { path } })),
  ]);
  return { job, summary, coverage, chart, usage, links: links.links };
}

/** maxAttempts bounds what the page reads of a very large job: the filters work on these. */
const maxAttempts = 5000;

/** loadAttempts reads a job's attempts, 500 a page (the API's largest). */
async function loadAttempts(id: string): Promise<{ attempts: Attempt[]; more: boolean }> {
  const attempts: Attempt[] = [];
  for (let offset: number | null = 0; offset !== null && attempts.length < maxAttempts; ) {
    const page: Schemas["ThumbnailsOutputBody"] = await ok(
      api.GET("/v2/jobs/{job_id}/thumbnails", { params: { path: { job_id: id }, query: { category: "all", limit: 500, offset } } }),
    );
    attempts.push(...page.thumbnails);
    offset = page.next_offset;
    if (offset === null) return { attempts, more: false };
  }
  return { attempts, more: true };
}

type TraceEnv = Schemas["TraceEnv"];

/** maxBuildProbes bounds how many attempts loadBuilds reads to find the job's environments. */
const maxBuildProbes = 20;

/**
 * loadBuilds says which build of each environment the job ran. The attempts' list does not name
 * their environment, so it reads /info of attempts, the first attempt of each task in list order
 * (a task names one environment), until every environment the job links to is found: one attempt
 * per environment, so for a job that ran across a redeploy it names the build its first attempt
 * ran, not every build. At most maxBuildProbes reads; an environment not found is named without
 * its build.
 */
async function loadBuilds(attempts: Attempt[], envs: Set<string>): Promise<Map<string, TraceEnv>> {
  const found = new Map<string, TraceEnv>();
  const tasks = new Set<string>();
  let probes = 0;
  for (const a of attempts) {
    if (found.size >= envs.size || probes >= maxBuildProbes) break;
    const task = a.task_id ?? a.task_version_id ?? a.id;
    if (tasks.has(task)) continue;
    tasks.add(task);
    probes++;
    const info = await ok(api.GET("/v2/trace/{trace_id}/info", { params: { path: { trace_id: a.id } } }));
    const env = info.environment;
    if (env && !found.has(env.id)) found.set(env.id, env);
  }
  return found;
}

export function Job({ id, signedIn, onUnauthorized }: { id: string; signedIn: boolean; onUnauthorized: () => void }) {
  const view = usePoll(() => loadJob(id), [id], {
    intervalMs: 2000,
    live: (v) => !terminalJob.has(v.job.status),
    onUnauthorized,
  });
  const [actionError, act] = useAction(view.reload);
  const s = view.data?.summary;
  const list = usePoll(() => loadAttempts(id), [id, s?.total_traces, s?.running, s?.completed, s?.error, s?.cancelled], { onUnauthorized });
  const attempts = list.data?.attempts;
  // The tab a reader chose; until then, the most useful one as the job runs.
  const [chosen, setChosen] = useState<Category>();
  const [filter, setFilter] = useState<Filter>(noFilter);
  const attemptsHeading = useRef<HTMLHeadingElement>(null);
  const groups = useMemo(() => groupErrors(attempts ?? []), [attempts]);
  const usage = useMemo(() => new Map(view.data?.usage?.traces.map((u) => [u.trace_id, u])), [view.data?.usage]);
  const envIds = [...new Set(view.data?.links.map((l) => l.registry.id).filter((x): x is string => !!x))].sort().join(",");
  // Read again as attempts start (before its sandbox starts, an attempt names the latest build).
  // Signed out, a published job's attempts show no environment (it may not be the reader's to
  // see), so there is nothing to read.
  const builds = usePoll(
    async () => (signedIn && attempts && envIds ? loadBuilds(attempts, new Set(envIds.split(","))) : new Map<string, TraceEnv>()),
    [signedIn, attempts, envIds],
    { onUnauthorized },
  );
  // What the results mix: builds of one environment, or versions of a task (read again as
  // attempts end).
  const mix = usePoll(() => ok(api.GET("/v2/jobs/{job_id}/mix", { params: { path: { job_id: id } } })), [id, s?.completed, s?.error, s?.cancelled], {
    onUnauthorized,
  });
  if (view.error && !view.data) {
    if (!signedIn && view.error instanceof APIError && view.error.status === 404)
      return (
        <p role="alert">
          This job is not published. <a href={href({ page: "signin" })}>Sign in</a> to see your team's jobs.
        </p>
      );
    return <p role="alert" className="error">{view.error.message}</p>;
  }
  if (!view.data) return <p aria-busy="true">Loading…</p>;
  const { job, summary, coverage, chart, usage: jobUsage, links } = view.data;
  const names = (pick: (l: Schemas["EntityLink"]) => string | null) => [...new Set(links.map(pick).filter((x): x is string => !!x))].join(", ") || "–";
  const category = chosen ?? usefulCategory(countCategories(attempts ?? []));
  const showAttempts = (c: Category, f: Filter) => {
    setChosen(c);
    setFilter(f);
    attemptsHeading.current?.scrollIntoView({ block: "start" });
    attemptsHeading.current?.focus();
  };
  const byTask = new Map<string, { errors: number }>();
  for (const a of attempts ?? []) {
    if (!a.task_id) continue;
    const t = byTask.get(a.task_id) ?? { errors: 0 };
    if (a.status === "error") t.errors++;
    byTask.set(a.task_id, t);
  }
  return (
    <section>
      <p>
        <a href={href({ page: "jobs" })}>← Jobs</a>
      </p>
      <h1>{job.name || job.id}</h1>
      <p>
        <JobStatus status={job.status} errors={summary.error} /> · created {fmtTime(job.created_at)} · {job.group_size} attempts per task · at most{" "}
        {job.max_concurrent} at once
        {job.published && " · published: anyone with the link can open it"}
      </p>
      <p>
        Models: {names((l) => l.model.name)} · <EnvironmentBuilds links={links} builds={builds.data} /> · taskset: {names((l) => l.taskset.name)}
      </p>
      {builds.error && <p className="muted">Which builds ran could not be read: {builds.error.message}</p>}
      {mix.data?.mixed && <MixNotice mix={mix.data} />}
      {signedIn && job.can_edit && (
        <div className="inline" role="group" aria-label="Job actions">
          {!job.published && (
            <button type="button" className="secondary" onClick={() => act(() => ok(api.POST("/v2/jobs/{job_id}/publish", { params: { path: { job_id: id } } })))}>
              Publish
            </button>
          )}
          <button type="button" className="secondary" onClick={() => act(() => ok(api.POST("/v2/jobs/{job_id}/invalidate", { params: { path: { job_id: id } } })))}>
            Invalidate its attempts
          </button>
          {!terminalJob.has(job.status) && (
            <button type="button" className="secondary" onClick={() => act(() => ok(api.POST("/v2/rollouts/cancel_job", { body: { job_id: id } })))}>
              Cancel
            </button>
          )}
        </div>
      )}
      {job.status === "paused" && (
        <div className="notice" role="status">
          <p>
            Paused: this job has spent {fmtUSD(jobUsage?.total_cost)} of its ceiling of {fmtUSD(job.max_cost_usd)}. It starts no attempt until its ceiling is raised
            or lifted; the attempts it stopped at their next model call read cancelled (stop reason budget), and a retry of the job runs them again once it has
            ended.
          </p>
          {signedIn && job.can_edit && (
            <button
              type="button"
              onClick={() => act(() => ok(api.POST("/v2/jobs/{job_id}/resume", { params: { path: { job_id: id } }, body: { lift_ceiling: true } })))}
            >
              Lift the ceiling and go on
            </button>
          )}
        </div>
      )}
      {actionError && (
        <p role="alert" className="error">
          {actionError}
        </p>
      )}
      <dl className="counts" aria-label="Attempts">
        {(
          [
            ["Total", summary.total_traces],
            ["Pending", summary.pending],
            ["Running", summary.initializing + summary.running],
            ["Completed", summary.completed],
            ["Errors", summary.error],
            ["Cancelled", summary.cancelled],
            ["Mean reward", fmtReward(summary.avg_reward)],
            ["Cost", job.max_cost_usd == null ? fmtUSD(jobUsage?.total_cost) : `${fmtUSD(jobUsage?.total_cost)} of ${fmtUSD(job.max_cost_usd)}`],
            ["Inference", jobUsage ? `${fmtUSD(jobUsage.inference_cost.cost)} · ${jobUsage.inference_cost.count} calls` : "–"],
            ["Environments", jobUsage ? `${fmtUSD(jobUsage.environment_cost.cost)} · ${jobUsage.environment_cost.count} sandboxes` : "–"],
          ] as const
        ).map(([k, v]) => (
          <div key={k} className={k === "Errors" && summary.error > 0 ? "bad" : undefined}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>

      {groups.length > 0 && (
        <>
          <h2>Errors</h2>
          <p>
            {summary.error} attempt{summary.error === 1 ? "" : "s"} ended in an error, with {groups.length} distinct message
            {groups.length === 1 ? "" : "s"}. An error is not a score: the mean reward and the histogram leave them out.
          </p>
          <ErrorGroups groups={groups} onShow={(g) => showAttempts("errors", { ...noFilter, group: g.key })} />
        </>
      )}

      {mix.data && (mix.data.entrants.length > 1 || mix.data.entrants.some((e) => e.agent)) && <Entrants entrants={mix.data.entrants} />}

      <h2>Rewards</h2>
      <Histogram points={chart.data_points} />

      {coverage && (
        <>
          <h2>Tasks</h2>
          <p>
            Taskset {coverage.taskset_name || "–"}: {coverage.tasks_with_traces} of {coverage.total_tasks} tasks run.
          </p>
          <table>
            <caption className="visually-hidden">Tasks</caption>
            <Head cols={["Task", "Attempts", "Errors", "Statuses", "Mean reward"]} />
            <tbody>
              {coverage.tasks.map((t) => (
                <tr key={t.task_id}>
                  <td>{t.task_name}</td>
                  <td>
                    {t.trace_count > 0 ? (
                      <button
                        type="button"
                        className="linklike"
                        aria-label={`Show the ${t.trace_count} attempt${t.trace_count === 1 ? "" : "s"} of ${t.task_name}`}
                        onClick={() => showAttempts("all", { ...noFilter, task: t.task_id })}
                      >
                        {t.trace_count}
                      </button>
                    ) : (
                      0
                    )}
                  </td>
                  <td className={byTask.get(t.task_id)?.errors ? "error" : undefined}>{byTask.get(t.task_id)?.errors ?? 0}</td>
                  <td>{t.statuses.join(", ") || "–"}</td>
                  <td>{fmtReward(t.avg_reward)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}

      <h2 id="attempts" ref={attemptsHeading} tabIndex={-1}>
        Attempts
      </h2>
      {list.error && <p role="alert" className="error">{list.error.message}</p>}
      {list.data?.more && <p className="muted">The first {maxAttempts} attempts are shown and counted below.</p>}
      {!attempts && !list.error && <p aria-busy="true">Loading…</p>}
      {attempts && (
        <Attempts attempts={attempts} usage={jobUsage ? usage : undefined} category={category} onCategory={setChosen} filter={filter} onFilter={setFilter} />
      )}
    </section>
  );
}

/** EnvironmentBuilds names each environment the job links to with the build its attempts ran
 * ("environment todo: build 1 (sha256:e46c65…)"). */
function EnvironmentBuilds({ links, builds }: { links: Schemas["EntityLink"][]; builds?: Map<string, TraceEnv> }) {
  const envs = new Map<string, string>();
  for (const l of links) if (l.registry.id && l.registry.name) envs.set(l.registry.id, l.registry.name);
  if (envs.size === 0) return <>environments: –</>;
  return (
    <span data-testid="environments">
      {[...envs].map(([id, name], i) => {
        const b = builds?.get(id);
        return (
          <span key={id}>
            {i > 0 && ", "}
            environment <a href={href({ page: "environment", id })}>{name}</a>
            {b?.build_version != null && `: build ${b.build_version}`}
            {b?.build_digest && (
              <>
                {" ("}
                <code title={b.build_digest}>{shortDigest(b.build_digest)}</code>
                {")"}
              </>
            )}
          </span>
        );
      })}
    </span>
  );
}

/** Histogram counts the scored attempts' rewards, each rounded to the nearest tenth, so that a bar
 * stands over its label (1.0 over "1.0"). Errored attempts are left out: the 0 the API records
 * for them is not a score. */
function Histogram({ points }: { points: Schemas["ChartPoint"][] }) {
  const errors = points.filter((p) => p.status === "error").length;
  const rewards = points.filter((p) => p.reward !== null && p.status !== "error").map((p) => p.reward as number);
  const bins = new Array(11).fill(0) as number[];
  for (const r of rewards) bins[Math.min(10, Math.max(0, Math.round(r * 10)))]++;
  const max = Math.max(1, ...bins);
  const w = 440,
    h = 120,
    bw = w / bins.length;
  return (
    <figure>
      <svg viewBox={`0 0 ${w} ${h + 20}`} width={w} height={h + 20} role="img" aria-label={`Reward histogram of ${rewards.length} attempts`}>
        {bins.map((n, i) => (
          <g key={i} className="bin" data-reward={(i / 10).toFixed(1)} data-count={n}>
            <rect x={i * bw + 2} y={h - (n / max) * h} width={bw - 4} height={(n / max) * h} className="bar">
              <title>{`reward ≈ ${(i / 10).toFixed(1)}: ${n}`}</title>
            </rect>
            <text x={i * bw + bw / 2} y={h + 14} textAnchor="middle" className="axis">
              {(i / 10).toFixed(1)}
            </text>
          </g>
        ))}
      </svg>
      <figcaption>
        {rewards.length} attempts with a reward, each counted at its nearest tenth
        {errors > 0 && `; ${errors} errored attempt${errors === 1 ? " is" : "s are"} left out (an error is not a score)`}.
      </figcaption>
    </figure>
  );
}

/** entrantName names an (agent, model) pair: "react:1 · gpt-4.1-mini", or "built-in loop · …". */
function entrantName(e: Schemas["Entrant"]): string {
  return `${e.agent ? `${e.agent.name}:${e.agent.build_version}` : "built-in loop"} · ${e.model_name || "–"}`;
}

/** Entrants shows each (agent, model) pair the job ran with its own results, never pooled: a row
 * per pair, then, when it compares several, the mean reward of each on each task. */
function Entrants({ entrants }: { entrants: Schemas["Entrant"][] }) {
  const tasks = new Map<string, string>();
  for (const e of entrants) for (const t of e.tasks) tasks.set(t.task_id, t.task_name);
  const taskIds = [...tasks.keys()].sort((a, b) => (tasks.get(a) ?? "").localeCompare(tasks.get(b) ?? ""));
  return (
    <>
      <h2>Agents and models</h2>
      <p>Each agent and model the job ran, with its own results{entrants.length > 1 && ": the job's mean reward above pools them"}.</p>
      <table aria-label="Agents and models">
        <Head cols={["Agent", "Model", "Attempts", "Scored", "Mean reward"]} />
        <tbody>
          {entrants.map((e) => (
            <tr key={`${e.agent?.build_id ?? ""}/${e.model_id ?? ""}`}>
              <td>
                {e.agent ? (
                  <span title={e.agent.digest}>
                    {e.agent.name}:{e.agent.build_version}
                  </span>
                ) : (
                  "built-in loop"
                )}
              </td>
              <td>{e.model_name || "–"}</td>
              <td>{e.attempts}</td>
              <td>{e.scored_attempts}</td>
              <td>{fmtReward(e.mean_reward)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {entrants.length > 1 && taskIds.length > 0 && (
        <table aria-label="Mean reward per task, by agent and model">
          <thead>
            <tr>
              <th scope="col">Task</th>
              {entrants.map((e) => (
                <th scope="col" key={`${e.agent?.build_id ?? ""}/${e.model_id ?? ""}`}>
                  {entrantName(e)}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {taskIds.map((id) => (
              <tr key={id}>
                <td>{tasks.get(id)}</td>
                {entrants.map((e) => {
                  const t = e.tasks.find((x) => x.task_id === id);
                  return <td key={`${e.agent?.build_id ?? ""}/${e.model_id ?? ""}`}>{t ? fmtReward(t.mean_reward) : "–"}</td>;
                })}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** MixNotice says that a job's results mix environment builds or task versions, and how each did. */
function MixNotice({ mix }: { mix: Schemas["JobMix"] }) {
  const builds = mix.environment_builds.filter((b) => b.digest);
  const mean = (m: number | null, n: number) => (m === null ? "no scored attempt" : `mean ${fmtReward(m)} over ${n}`);
  return (
    <div role="note" className="notice" aria-label="Mixed results">
      <p>
        <strong>Its results mix what is not comparable:</strong> the mean reward and the per-task table average across them. Compare
        them apart with <code>proctor compare</code> (it pairs by build and version).
      </p>
      <ul>
        {builds.length > 1 &&
          builds.map((b) => (
            <li key={b.digest}>
              {b.environment} build {b.build_version} ({shortDigest(b.digest)}): {b.attempts} attempts, {mean(b.mean_reward, b.scored_attempts)}
            </li>
          ))}
        {mix.tasks_with_several_versions.map((t) => (
          <li key={t.task_id}>
            task {t.task_name}:{" "}
            {t.versions.map((v) => `version ${v.version}: ${v.attempts} attempts, ${mean(v.mean_reward, v.scored_attempts)}`).join("; ")}
          </li>
        ))}
      </ul>
    </div>
  );
}
