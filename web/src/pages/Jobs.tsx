import { useState } from "react";
import { api, ok, type Schemas } from "../api/client";
import { fmtReward, fmtTime, fmtUSD, terminalJob } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { Head, JobStatus } from "../ui";

type Row = { job: Schemas["Job"]; summary: Schemas["JobSummary"]; cost: number | null };

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
      const [summary, usage] = await Promise.all([
        ok(api.GET("/v2/jobs/{job_id}/summary", { params: { path: { job_id: job.id } } })),
        ok(api.GET("/v2/jobs/{job_id}/usage", { params: { path: { job_id: job.id } } })).catch(() => undefined),
      ]);
      return { job, summary, cost: usage?.total_cost ?? null };
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
        <table>
          <caption className="visually-hidden">Your team's jobs, newest first</caption>
          <Head cols={["Compare", "Job", "Status", "Progress", "Errors", "Mean reward", "Cost", "Created"]} actions />
          <tbody>
            {data.map(({ job, summary, cost }) => {
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
