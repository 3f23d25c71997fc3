import { useState } from "react";
import { api, APIError, ok, type Schemas } from "../api/client";
import { fmtTime } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { Tabs } from "../tabs";
import { Head, Status } from "../ui";

const reviewStatuses = ["pending", "ready", "verified", "revision", "rejected"] as const;

async function loadTask(tasksetId: string, id: string) {
  const path = { task_id: id };
  const [ts, task, comments, activity, brief, ready] = await Promise.all([
    ok(api.GET("/v2/tasksets/{taskset_id}", { params: { path: { taskset_id: tasksetId } } })),
    ok(api.GET("/v2/tasks/{task_id}/versions", { params: { path } })),
    ok(api.GET("/v2/tasks/{task_id}/comments", { params: { path } })),
    ok(api.GET("/v2/tasks/{task_id}/activity", { params: { path, query: { limit: 100 } } })),
    ok(api.GET("/v2/tasks/{task_id}/brief", { params: { path } })).catch(() => undefined),
    ok(api.GET("/v2/tasks/{task_id}/ready-check", { params: { path } })).catch(() => undefined),
  ]);
  if (task.taskset_id !== ts.id) throw new APIError("the task is not in this taskset", 404);
  const latest = task.versions[0];
  return { ts, task, comments: comments.comments, activity: activity.events, brief, ready, content: latest?.content, latest };
}

export function Task({ tasksetId, id, onUnauthorized }: { tasksetId: string; id: string; onUnauthorized: () => void }) {
  const { data, error, reload } = usePoll(() => loadTask(tasksetId, id), [tasksetId, id], { onUnauthorized });
  const [view, setView] = useState<"content" | "versions" | "comments" | "activity" | "brief" | "ready">("content");
  const [comment, setComment] = useState("");
  const [stage, setStage] = useState("");
  const [actionError, act] = useAction(reload);
  if (error && !data) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const { ts, task, comments, activity, brief, ready, content, latest } = data;
  return (
    <section>
      <p>
        <a href={href({ page: "taskset", id: ts.id })}>← {ts.name}</a>
      </p>
      <h1>{task.name}</h1>
      <p>
        version {latest?.version ?? "–"} ({task.versions.length} in all) · review <Status value={task.status} /> · stage {task.stage ?? "–"} ·
        written {fmtTime(latest?.created_at)}
      </p>
      <div className="inline" role="group" aria-label="Review status">
        {reviewStatuses
          .filter((s) => s !== task.status)
          .map((s) => (
            <button
              key={s}
              type="button"
              className="secondary"
              onClick={() => act(() => ok(api.PATCH("/v2/tasks/status", { body: { ids: [task.id], status: s } })))}
            >
              Mark {s}
            </button>
          ))}
      </div>
      {ts.stages.length > 0 && (
        <form
          className="inline"
          aria-label="Review stage"
          onSubmit={(e) => {
            e.preventDefault();
            const to = stage || ts.stages[0];
            void act(() => ok(api.PATCH("/v2/tasks/stage", { body: { ids: [task.id], stage: to } })));
          }}
        >
          <label htmlFor="task-stage">Stage</label>
          <select id="task-stage" value={stage || ts.stages[0]} onChange={(e) => setStage(e.target.value)}>
            {ts.stages.map((st) => (
              <option key={st} value={st}>
                {st}
              </option>
            ))}
          </select>
          <button type="submit" className="secondary">
            Move to this stage
          </button>
        </form>
      )}
      {actionError && <p role="alert" className="error">{actionError}</p>}
      <Tabs
        label="Task"
        tabs={[
          { key: "content", title: "Content" },
          { key: "versions", title: `Versions (${task.versions.length})` },
          { key: "comments", title: `Comments (${comments.length})` },
          { key: "activity", title: "Activity" },
          { key: "brief", title: `Brief (${brief?.attachments.length ?? 0})` },
          { key: "ready", title: "Ready check" },
        ]}
        selected={view}
        onSelect={setView}
      >
        {view === "content" && <pre>{JSON.stringify(content ?? {}, null, 2)}</pre>}
        {view === "versions" && (
          <ul className="versions" aria-label="Versions, newest first">
            {task.versions.map((v) => (
              <li key={v.id}>
                <details>
                  <summary>
                    version {v.version} of {latest?.version ?? task.versions.length}
                    {v.id === task.latest_version_id && " (latest)"} · {fmtTime(v.created_at)}
                  </summary>
                  <pre>{JSON.stringify(v.content, null, 2)}</pre>
                </details>
              </li>
            ))}
          </ul>
        )}
        {view === "comments" && (
          <>
            <ul className="comments">
              {comments.map((c) => (
                <li key={c.id}>
                  <strong>{c.user_name}</strong> <span className="muted">{fmtTime(c.created_at)}</span>
                  <p>{c.message}</p>
                </li>
              ))}
            </ul>
            <form
              onSubmit={(e) => {
                e.preventDefault();
                void act(async () => {
                  await ok(api.POST("/v2/tasks/{task_id}/comments", { params: { path: { task_id: task.id } }, body: { body: comment } }));
                  setComment("");
                });
              }}
            >
              <label htmlFor="comment">Comment (mention someone with @name or @email)</label>
              <textarea id="comment" rows={3} value={comment} onChange={(e) => setComment(e.target.value)} required />
              <button type="submit" disabled={comment.trim() === ""}>
                Comment
              </button>
            </form>
          </>
        )}
        {view === "activity" && (
          <ol className="thumbs">
            {activity.map((a) => (
              <li key={a.key}>
                {fmtTime(a.at)} · {a.by_name || "someone"}: {a.summary}
              </li>
            ))}
          </ol>
        )}
        {view === "brief" && <Brief brief={brief} tasksetId={ts.id} content={content} onChanged={reload} />}
        {view === "ready" && <Ready ready={ready} />}
      </Tabs>
    </section>
  );
}

/** Brief lists the files the task refers to, and attaches a new one: the file is uploaded for
 * the taskset, then a new version of the task names it in its description. */
function Brief({
  brief,
  tasksetId,
  content,
  onChanged,
}: {
  brief?: Schemas["BriefOutputBody"];
  tasksetId: string;
  content?: Schemas["ExportedTask"];
  onChanged: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  return (
    <>
      {brief?.prompt && <p>{brief.prompt}</p>}
      {brief && brief.attachments.length > 0 ? (
        <ul className="thumbs" aria-label="Attachments">
          {brief.attachments.map((a) => (
            <li key={a.storage_url}>
              <a href={a.url}>{a.name}</a> <span className="muted">{a.size} bytes · {a.status}</span>
            </li>
          ))}
        </ul>
      ) : (
        <p>No attachments.</p>
      )}
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const input = (e.currentTarget.elements.namedItem("attachment") as HTMLInputElement | null)?.files?.[0];
          if (!input || !content) return;
          setBusy(true);
          setError("");
          try {
            const form = new FormData();
            form.append("file", input);
            const r = await fetch(`/v2/uploads?taskset_id=${encodeURIComponent(tasksetId)}`, { method: "POST", body: form, credentials: "same-origin" });
            const body = (await r.json()) as unknown;
            if (!r.ok) throw new Error((body as { error?: { message?: string } }).error?.message ?? `upload failed (${r.status})`);
            const up = body as Schemas["UploadView"];
            const description = [content.description, `Attachment: ${up.url}`].filter(Boolean).join("\n");
            await ok(api.POST("/v2/tasks/upload", { body: { taskset_id: tasksetId, tasks: [{ ...content, description }] } }));
            onChanged();
          } catch (err) {
            setError((err as Error).message);
          } finally {
            setBusy(false);
          }
        }}
      >
        <label htmlFor="attachment">Attach a file (up to 32 MiB)</label>
        <input id="attachment" name="attachment" type="file" required />
        <button type="submit" disabled={busy}>
          {busy ? "Uploading…" : "Attach"}
        </button>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
      </form>
    </>
  );
}

function Ready({ ready }: { ready?: Schemas["ReadyCheck"] }) {
  if (!ready) return <p>No ready check for this task.</p>;
  return (
    <>
      <p>
        {ready.passed ? "Ready" : "Not ready"}
        {!ready.has_requirements && " (the taskset sets no requirements)"} · evaluated {fmtTime(ready.evaluated_at)}
      </p>
      <table>
        <Head cols={["Check", "Required", "Current", "Passed"]} />
        <tbody>
          {ready.checks.map((c) => (
            <tr key={c.key}>
              <td>{c.label}</td>
              <td>{c.required}</td>
              <td>{c.current}</td>
              <td>{c.passed ? "yes" : `no: ${c.how_to_fix}`}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
