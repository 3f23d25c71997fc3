import { useState } from "react";
import { api, APIError, ok, Unauthorized, type Schemas } from "../api/client";
import { fmtReward, fmtTime, fmtUSD, terminalJob } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { Tabs } from "../tabs";
import { Head, Status } from "../ui";

const categories = ["successful", "failed", "live", "no_score"] as const;
type Category = (typeof categories)[number];

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

export function Job({ id, signedIn, onUnauthorized }: { id: string; signedIn: boolean; onUnauthorized: () => void }) {
  const view = usePoll(() => loadJob(id), [id], {
    intervalMs: 2000,
    live: (v) => !terminalJob.has(v.job.status),
    onUnauthorized,
  });
  const [category, setCategory] = useState<Category>("failed");
  const [actionError, act] = useAction(view.reload);
  const thumbs = usePoll(
    () => ok(api.GET("/v2/jobs/{job_id}/thumbnails", { params: { path: { job_id: id }, query: { category, limit: 100 } } })),
    [id, category, view.data?.summary.completed, view.data?.summary.error],
    { onUnauthorized },
  );
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
  const { job, summary, coverage, chart, usage, links } = view.data;
  const names = (pick: (l: Schemas["EntityLink"]) => string | null) => [...new Set(links.map(pick).filter((x): x is string => !!x))].join(", ") || "–";
  const counts = thumbs.data?.category_counts;
  return (
    <section>
      <p>
        <a href={href({ page: "jobs" })}>← Jobs</a>
      </p>
      <h1>{job.name || job.id}</h1>
      <p>
        <Status value={job.status} /> · created {fmtTime(job.created_at)} · {job.group_size} attempts per task · at most{" "}
        {job.max_concurrent} at once
        {job.published && " · published: anyone with the link can open it"}
      </p>
      <p>
        Models: {names((l) => l.model.name)} · environments: {names((l) => l.registry.name)} · taskset: {names((l) => l.taskset.name)}
      </p>
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
            ["Cost", fmtUSD(usage?.total_cost)],
            ["Inference", usage ? `${fmtUSD(usage.inference_cost.cost)} · ${usage.inference_cost.count} calls` : "–"],
            ["Environments", usage ? `${fmtUSD(usage.environment_cost.cost)} · ${usage.environment_cost.count} sandboxes` : "–"],
          ] as const
        ).map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>

      <h2>Rewards</h2>
      <Histogram points={chart.data_points} />

      {coverage && (
        <>
      <h2>Tasks</h2>
      <p>
        Taskset {coverage.taskset_name || "–"}: {coverage.tasks_with_traces} of {coverage.total_tasks} tasks run.
      </p>
      <table>
        <Head cols={["Task", "Attempts", "Statuses", "Mean reward"]} />
        <tbody>
          {coverage.tasks.map((t) => (
            <tr key={t.task_id}>
              <td>{t.task_name}</td>
              <td>{t.trace_count}</td>
              <td>{t.statuses.join(", ") || "–"}</td>
              <td>{fmtReward(t.avg_reward)}</td>
            </tr>
          ))}
        </tbody>
      </table>
        </>
      )}

      <h2>Attempts</h2>
      <Tabs
        label="Attempts by category"
        tabs={categories.map((c) => ({ key: c, title: `${c.replace("_", " ")} (${counts?.[c] ?? 0})` }))}
        selected={category}
        onSelect={setCategory}
      >
        {thumbs.data && thumbs.data.thumbnails.length === 0 && <p>None.</p>}
        {thumbs.data && thumbs.data.thumbnails.length > 0 && (
          <ul className="thumbs">
            {thumbs.data.thumbnails.map((t) => (
              <li key={t.id}>
                <a href={href({ page: "trace", id: t.id })}>{t.task_name ?? t.name}</a> <Status value={t.status} />{" "}
                {t.stop_reason && <span className="muted">{t.stop_reason}</span>} · reward {fmtReward(t.reward)}
              </li>
            ))}
          </ul>
        )}
      </Tabs>
    </section>
  );
}

/** Histogram bins the rewards of ended attempts into tenths. */
function Histogram({ points }: { points: Schemas["ChartPoint"][] }) {
  const rewards = points.filter((p) => p.reward !== null).map((p) => p.reward as number);
  const bins = new Array(10).fill(0) as number[];
  for (const r of rewards) bins[Math.min(9, Math.max(0, Math.floor(r * 10)))]++;
  const max = Math.max(1, ...bins);
  const w = 400,
    h = 120,
    bw = w / bins.length;
  return (
    <figure>
      <svg viewBox={`0 0 ${w} ${h + 20}`} width={w} height={h + 20} role="img" aria-label={`Reward histogram of ${rewards.length} attempts`}>
        {bins.map((n, i) => (
          <g key={i}>
            <rect x={i * bw + 2} y={h - (n / max) * h} width={bw - 4} height={(n / max) * h} className="bar">
              <title>{`${(i / 10).toFixed(1)}–${((i + 1) / 10).toFixed(1)}: ${n}`}</title>
            </rect>
            <text x={i * bw + bw / 2} y={h + 14} textAnchor="middle" className="axis">
              {(i / 10).toFixed(1)}
            </text>
          </g>
        ))}
      </svg>
      <figcaption>{rewards.length} attempts with a reward, in tenths (1.0 counts in the last bin).</figcaption>
    </figure>
  );
}
