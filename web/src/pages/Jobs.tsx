import { useMemo, useState } from "react";
import { api, ok, type Schemas } from "../api/client";
import { fmtMs, fmtReward, fmtTime, fmtUSD, terminalJob } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { JobStatus } from "../ui";

type Row = { job: Schemas["Job"]; summary: Schemas["JobSummary"]; cost: number | null; agents: string; models: string };

/** The entrants of a job (its agents and models) do not change once it is launched: read once. */
const entrantsOf = new Map<string, Promise<{ agents: string; models: string }>>();

function entrants(jobId: string): Promise<{ agents: string; models: string }> {
  let p = entrantsOf.get(jobId);
  if (!p) {
    p = ok(api.GET("/v2/jobs/{job_id}/mix", { params: { path: { job_id: jobId } } })).then((mix) => {
      const uniq = (xs: string[]) => [...new Set(xs)].join(", ");
      return {
        agents: uniq(mix.entrants.map((e) => (e.agent ? `${e.agent.name}:${e.agent.build_version}` : "built-in"))),
        models: uniq(mix.entrants.map((e) => e.model_name)),
      };
    });
    p.catch(() => entrantsOf.delete(jobId));
    entrantsOf.set(jobId, p);
  }
  return p;
}

/** durationMs is how long a job has run: to its last change once it ended, else to now. */
function durationMs(job: Schemas["Job"]): number {
  const end = terminalJob.has(job.status) ? Date.parse(job.updated_at) : Date.now();
  return Math.max(0, end - Date.parse(job.created_at));
}

/** The columns a reader sorts by, and how each orders two rows. */
const sorts: Record<string, (a: Row, b: Row) => number> = {
  Job: (a, b) => (a.job.name || a.job.id).localeCompare(b.job.name || b.job.id),
  Agent: (a, b) => a.agents.localeCompare(b.agents),
  Model: (a, b) => a.models.localeCompare(b.models),
  Status: (a, b) => a.job.status.localeCompare(b.job.status),
  Errors: (a, b) => a.summary.error - b.summary.error,
  "Mean reward": (a, b) => (a.summary.avg_reward ?? -Infinity) - (b.summary.avg_reward ?? -Infinity),
  Cost: (a, b) => (a.cost ?? -Infinity) - (b.cost ?? -Infinity),
  Duration: (a, b) => durationMs(a.job) - durationMs(b.job),
  Created: (a, b) => a.job.created_at.localeCompare(b.job.created_at),
};

async function loadJobs(tasksetId: string): Promise<Row[]> {
  let jobs: Schemas["Job"][];
  if (tasksetId) {
    const cards = await ok(api.GET("/v2/jobs/enriched", { params: { query: { taskset_id: tasksetId, limit: 20 } } }));
    jobs = await Promise.all(cards.jobs.map((c) => ok(api.GET("/v2/jobs/{job_id}", { params: { path: { job_id: c.id } } }))));
  } else {
    jobs = (await ok(api.GET("/v2/jobs", { params: { query: { limit: 20 } } }))).items;
  }
  return Promise.all(
    jobs.map(async (job) => {
      const [summary, usage, who] = await Promise.all([
        ok(api.GET("/v2/jobs/{job_id}/summary", { params: { path: { job_id: job.id } } })),
        ok(api.GET("/v2/jobs/{job_id}/usage", { params: { path: { job_id: job.id } } })).catch(() => undefined),
        entrants(job.id).catch(() => ({ agents: "", models: "" })),
      ]);
      return { job, summary, cost: usage?.total_cost ?? null, ...who };
    }),
  );
}

export function Jobs({ onUnauthorized }: { onUnauthorized: () => void }) {
  const [taskset, setTaskset] = useState("");
  const tasksets = usePoll(() => ok(api.GET("/v2/tasksets", { params: { query: { limit: 500 } } })), [], { onUnauthorized });
  const { data, error, reload } = usePoll(() => loadJobs(taskset), [taskset], {
    intervalMs: 3000,
    live: (rows) => rows.some((r) => !terminalJob.has(r.job.status)),
    onUnauthorized,
  });
  const [actionError, act] = useAction(reload);
  // Two jobs ticked are compared, the older as the baseline (A).
  const [picked, setPicked] = useState<string[]>([]);
  const pick = (id: string, on: boolean) => setPicked((p) => (on ? [...p.filter((x) => x !== id), id].slice(-2) : p.filter((x) => x !== id)));
  const pair = data && picked.length === 2 ? data.filter((r) => picked.includes(r.job.id)).map((r) => r.job) : [];
  const [older, newer] = pair.length === 2 ? [...pair].sort((x, y) => x.created_at.localeCompare(y.created_at)) : [];
  // Newest first until a column is chosen; a second click on it turns the order round.
  const [sort, setSort] = useState<{ col: string; desc: boolean }>({ col: "Created", desc: true });
  const [filter, setFilter] = useState("");
  const rows = useMemo(() => {
    const q = filter.trim().toLowerCase();
    const kept = (data ?? []).filter((r) => !q || [r.job.name, r.job.id, r.agents, r.models, r.job.status].some((f) => f.toLowerCase().includes(q)));
    const by = sorts[sort.col];
    return kept.sort((a, b) => (sort.desc ? -by(a, b) : by(a, b)));
  }, [data, filter, sort]);
  return (
    <section>
      <h1>Jobs</h1>
      <p>
        <label htmlFor="jobs-taskset">Taskset </label>
        <select id="jobs-taskset" value={taskset} onChange={(e) => setTaskset(e.target.value)}>
          <option value="">All</option>
          {tasksets.data?.items.map((ts) => (
            <option key={ts.id} value={ts.id}>
              {ts.name}
            </option>
          ))}
        </select>
      </p>
      {error && <p role="alert" className="error">{error.message}</p>}
      {actionError && (
        <p role="alert" className="error">
          {actionError}
        </p>
      )}
      {!data && !error && <p aria-busy="true">Loading…</p>}
      {data && data.length === 0 && (
        <p>
          No jobs yet. Run one with <code>proctor eval demo --model oracle</code>.
        </p>
      )}
      {data && data.length > 1 && (
        <p>
          {older && newer ? (
            <a href={href({ page: "compare", a: older.id, b: newer.id })}>
              Compare {older.name || older.id} with {newer.name || newer.id}
            </a>
          ) : (
            "Tick two jobs to compare them task by task."
          )}
        </p>
      )}
      {data && data.length > 0 && (
        <p>
          <label>
            Filter jobs <input type="search" value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="name, agent, model or status" />
          </label>
        </p>
      )}
      {data && data.length > 0 && (
        <table>
          <caption className="visually-hidden">Your team's jobs, sorted by {sort.col.toLowerCase()}</caption>
          <thead>
            <tr>
              {["Compare", "Job", "Agent", "Model", "Status", "Progress", "Errors", "Mean reward", "Cost", "Duration", "Created"].map((c) => (
                <th key={c} scope="col" aria-sort={sort.col === c ? (sort.desc ? "descending" : "ascending") : undefined}>
                  {sorts[c] ? (
                    <button type="button" className="linklike" onClick={() => setSort((s) => ({ col: c, desc: s.col === c ? !s.desc : c !== "Job" && c !== "Agent" && c !== "Model" }))}>
                      {c}
                      {sort.col === c ? (sort.desc ? " ↓" : " ↑") : ""}
                    </button>
                  ) : (
                    c
                  )}
                </th>
              ))}
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map(({ job, summary, cost, agents, models }) => {
              const done = summary.completed + summary.error + summary.cancelled;
              return (
                <tr key={job.id}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`Compare ${job.name || job.id}`}
                      checked={picked.includes(job.id)}
                      onChange={(e) => pick(job.id, e.target.checked)}
                    />
                  </td>
                  <td>
                    <a href={href({ page: "job", id: job.id })}>{job.name || job.id}</a>
                  </td>
                  <td>{agents}</td>
                  <td>{models}</td>
                  <td>
                    <JobStatus status={job.status} errors={summary.error} />
                  </td>
                  <td>
                    <progress max={summary.total_traces || 1} value={done} aria-label={`${done} of ${summary.total_traces} attempts done`} />{" "}
                    {done}/{summary.total_traces}
                  </td>
                  <td className={summary.error > 0 ? "error" : undefined}>{summary.error}</td>
                  <td>{fmtReward(summary.avg_reward)}</td>
                  <td>{fmtUSD(cost)}</td>
                  <td>{fmtMs(durationMs(job))}</td>
                  <td>{fmtTime(job.created_at)}</td>
                  <td>
                    {!terminalJob.has(job.status) && (
                      <button
                        type="button"
                        className="secondary"
                        onClick={() => act(() => ok(api.POST("/v2/rollouts/cancel_job", { body: { job_id: job.id } })))}
                      >
                        Cancel
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
