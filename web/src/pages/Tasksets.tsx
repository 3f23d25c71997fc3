import { useState } from "react";
import { api, ok } from "../api/client";
import { fmtTime } from "../format";
import { usePoll } from "../hooks";
import { href, navigate } from "../router";
import { Head, Status } from "../ui";

export function Tasksets({ onUnauthorized }: { onUnauthorized: () => void }) {
  const { data, error } = usePoll(() => ok(api.GET("/v2/tasksets", { params: { query: { limit: 100 } } })), [], { onUnauthorized });
  return (
    <section>
      <h1>Tasksets</h1>
      {error && <p role="alert" className="error">{error.message}</p>}
      {data && data.items.length === 0 && (
        <p>
          No tasksets. Upload tasks with <code>proctor tasks upload FILE.json</code>.
        </p>
      )}
      {data && data.items.length > 0 && (
        <table>
          <Head cols={["Taskset", "Tasks", "Purpose", "Updated"]} />
          <tbody>
            {data.items.map((ts) => (
              <tr key={ts.id}>
                <td>
                  <a href={href({ page: "taskset", id: ts.id })}>{ts.name}</a>
                  {ts.description && <div className="muted">{ts.description}</div>}
                </td>
                <td>{ts.task_count}</td>
                <td>{ts.purpose}</td>
                <td>{fmtTime(ts.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

async function loadTaskset(id: string) {
  const path = { taskset_id: id };
  const [ts, tasks, models] = await Promise.all([
    ok(api.GET("/v2/tasksets/{taskset_id}", { params: { path } })),
    ok(api.GET("/v2/tasksets/{taskset_id}/tasks", { params: { path, query: { limit: 500 } } })),
    ok(api.GET("/v2/models", { params: { query: { limit: 500 } } })),
  ]);
  return { ts, tasks: tasks.items, models: models.items };
}

export function Taskset({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const { data, error } = usePoll(() => loadTaskset(id), [id], { onUnauthorized });
  const [model, setModel] = useState("");
  const [groupSize, setGroupSize] = useState(1);
  const [launchError, setLaunchError] = useState("");
  if (error && !data) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const { ts, tasks, models } = data;
  const chosen = model || models[0]?.id || "";
  return (
    <section>
      <p>
        <a href={href({ page: "tasksets" })}>← Tasksets</a>
      </p>
      <h1>{ts.name}</h1>
      {ts.description && <p>{ts.description}</p>}
      <h2>Run it</h2>
      <form
        className="inline"
        onSubmit={async (e) => {
          e.preventDefault();
          setLaunchError("");
          try {
            const out = await ok(
              api.POST("/v2/rollouts/run_list", {
                body: {
                  taskset_id: ts.id,
                  model_ids: [chosen],
                  group_size: groupSize,
                  max_concurrent: 10,
                  max_steps: 30,
                  name: `${ts.name} × ${models.find((m) => m.id === chosen)?.model_name ?? "model"}`,
                },
              }),
            );
            navigate({ page: "job", id: out.job_id });
          } catch (err) {
            setLaunchError((err as Error).message);
          }
        }}
      >
        <label htmlFor="run-model">Model</label>
        <select id="run-model" value={chosen} onChange={(e) => setModel(e.target.value)}>
          {models.map((m) => (
            <option key={m.id} value={m.id}>
              {m.model_name}
            </option>
          ))}
        </select>
        <label htmlFor="run-group">Attempts per task</label>
        <input id="run-group" type="number" min={1} max={100} value={groupSize} onChange={(e) => setGroupSize(Number(e.target.value) || 1)} />
        <button type="submit" disabled={!chosen}>
          Run {tasks.length} tasks
        </button>
        {launchError && (
          <p role="alert" className="error">
            {launchError}
          </p>
        )}
      </form>
      <h2>Tasks</h2>
      <table>
        <Head cols={["Task", "Version", "Review", "Stage", "Updated"]} />
        <tbody>
          {tasks.map((t) => (
            <tr key={t.id}>
              <td>
                <a href={href({ page: "task", tasksetId: ts.id, id: t.id })}>{t.name}</a>
              </td>
              <td>v{t.version}</td>
              <td>
                <Status value={t.status} />
              </td>
              <td>{t.stage ?? "–"}</td>
              <td>{fmtTime(t.updated_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
