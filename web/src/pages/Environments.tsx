import { useState } from "react";
import { APIError, api, ok, type Schemas } from "../api/client";
import { fmtReward, fmtTime, shortDigest } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { Tabs } from "../tabs";
import { Head, Status } from "../ui";

export function Environments({ onUnauthorized }: { onUnauthorized: () => void }) {
  const [search, setSearch] = useState("");
  const { data, error } = usePoll(
    () => ok(api.GET("/v2/registry", { params: { query: { limit: 100, include_latest_scenarios: true, ...(search ? { search } : {}) } } })),
    [search],
    { onUnauthorized },
  );
  const agents = usePoll(() => ok(api.GET("/v2/agents", { params: { query: { limit: 100 } } })), [], { onUnauthorized });
  return (
    <section>
      <h1>Environments</h1>
      <p>
        <label htmlFor="env-search">Search </label>
        <input id="env-search" type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
      </p>
      {error && <p role="alert" className="error">{error.message}</p>}
      {data && data.items.length === 0 && (
        <p>
          No environments. Deploy one with <code>proctor env deploy DIR</code>.
        </p>
      )}
      {data && data.items.length > 0 && (
        <table>
          <Head cols={["Environment", "Description", "Scenarios", "Updated"]} />
          <tbody>
            {data.items.map((r) => (
              <tr key={r.id}>
                <td>
                  <a href={href({ page: "environment", id: r.id })}>{r.name}</a>
                </td>
                <td>{r.description || "–"}</td>
                <td>{r.latest_build_id ? (r.latest_scenarios?.length ?? 0) : "– (no build yet)"}</td>
                <td>{fmtTime(r.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Agents</h2>
      {agents.error && <p role="alert" className="error">{agents.error.message}</p>}
      {agents.data && agents.data.items.length === 0 && (
        <p>
          No brought agents. Deploy one with <code>proctor agent deploy DIR --name NAME</code>, and run it with{" "}
          <code>proctor eval TASKSET --agent NAME --model MODEL</code>.
        </p>
      )}
      {agents.data && agents.data.items.length > 0 && (
        <table aria-label="Agents">
          <Head cols={["Agent", "Latest build", "Digest", "Runs", "Builds", "Updated"]} />
          <tbody>
            {agents.data.items.map((a) => (
              <tr key={a.id}>
                <td>{a.name}</td>
                <td>{a.version ?? "– (no build yet)"}</td>
                <td>{a.digest ? <code title={a.digest}>{shortDigest(a.digest)}</code> : "–"}</td>
                <td>{a.placement === "inside" ? "inside the environment" : "beside the environment"}</td>
                <td>{a.builds}</td>
                <td>{fmtTime(a.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

type EnvView = {
  env: Schemas["RegistryDetail"];
  scenarios: Schemas["Scenario"][];
  builds: Schemas["Build"][];
  vars: Schemas["EnvVar"][];
};

async function loadEnvironment(id: string): Promise<EnvView> {
  const [env, scenarios, builds, vars] = await Promise.all([
    ok(api.GET("/v2/registry/{registry_id}", { params: { path: { registry_id: id } } })),
    ok(api.GET("/v2/registry/{registry_id}/scenarios", { params: { path: { registry_id: id } } })),
    ok(api.GET("/v2/builds", { params: { query: { registry_id: id, limit: 20 } } })),
    ok(api.GET("/v2/env-vars", { params: { query: { registry_id: id } } })).catch(() => ({ variables: [] })),
  ]);
  return { env, scenarios: scenarios ?? [], builds: builds.builds, vars: vars.variables };
}

const buildDone = new Set(["succeeded", "failed", "cancelled"]);

export function Environment({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const { data, error, reload } = usePoll(() => loadEnvironment(id), [id], {
    intervalMs: 2000,
    live: (v) => v.builds.some((b) => !buildDone.has(b.status)),
    onUnauthorized,
  });
  const [actionError, act] = useAction(reload);
  const [view, setView] = useState<"scenarios" | "tools" | "builds" | "source" | "vars">("scenarios");
  const [buildId, setBuildId] = useState<string>();
  if (error && !data) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const { env, scenarios, builds, vars } = data;
  const shown = buildId ?? env.latest_build_id ?? builds[0]?.id;
  const tools = lockTools(env.latest_build?.lock);
  return (
    <section>
      <p>
        <a href={href({ page: "environments" })}>← Environments</a>
      </p>
      <h1>{env.name}</h1>
      <p>{env.description}</p>
      <p className="muted">
        latest build {env.latest_build ? `v${env.latest_build.version} · ${env.latest_build.image_name} · ${env.latest_build.digest.slice(0, 19)}` : "–"}
      </p>
      <Tabs
        label="Environment"
        tabs={[
          { key: "scenarios", title: `Scenarios (${scenarios.length})` },
          { key: "tools", title: `Tools (${tools.length})` },
          { key: "builds", title: `Builds (${builds.length})` },
          { key: "source", title: "Source" },
          { key: "vars", title: `Variables (${vars.length})` },
        ]}
        selected={view}
        onSelect={setView}
      >
        {view === "scenarios" && (
          <table>
            <Head cols={["Scenario", "Description", "Arguments"]} />
            <tbody>
              {scenarios.map((s) => (
                <tr key={s.id}>
                  <td>{s.name}</td>
                  <td>{s.description || "–"}</td>
                  <td>
                    <code>{Object.keys((s.args_schema?.properties as Record<string, unknown>) ?? {}).join(", ") || "–"}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {view === "tools" && <Tools tools={tools} />}
        {view === "builds" && (
          <>
            {actionError && (
              <p role="alert" className="error">
                {actionError}
              </p>
            )}
            <ul className="thumbs" aria-label="Builds">
              {builds.map((b) => (
                <li key={b.id}>
                  <button type="button" className="linklike" aria-pressed={b.id === shown} onClick={() => setBuildId(b.id)}>
                    v{b.version}
                  </button>{" "}
                  <Status value={b.status} />
                  {b.id === env.latest_build_id && <strong className="latest"> latest: new runs use it</strong>} · {fmtTime(b.created_at)}
                  {b.duration_seconds !== null && ` · ${b.duration_seconds.toFixed(1)} s`}
                  {b.digest && <code className="muted"> {b.digest.slice(0, 19)}</code>}
                  {b.error_message && <span className="error"> · {b.error_message}</span>}
                  {env.can_edit && b.status === "succeeded" && b.id !== env.latest_build_id && (
                    <>
                      {" "}
                      <button
                        type="button"
                        className="secondary"
                        aria-label={`Set v${b.version} as latest`}
                        onClick={() => act(() => ok(api.POST("/v2/builds/{build_id}/set-latest", { params: { path: { build_id: b.id } } })))}
                      >
                        Set as latest
                      </button>
                    </>
                  )}
                </li>
              ))}
            </ul>
            {shown && <Certification id={shown} onUnauthorized={onUnauthorized} />}
            {shown && <ReplayCheck id={shown} onUnauthorized={onUnauthorized} />}
            {shown && <BuildLog id={shown} onUnauthorized={onUnauthorized} />}
          </>
        )}
        {view === "source" && shown && <SourceBrowser buildId={shown} onUnauthorized={onUnauthorized} />}
        {view === "vars" &&
          (vars.length === 0 ? (
            <p>No variables.</p>
          ) : (
            <table>
              <Head cols={["Name", "Value", "Updated"]} />
              <tbody>
                {vars.map((v) => (
                  <tr key={v.id}>
                    <td>
                      <code>{v.name}</code>
                    </td>
                    <td>
                      <code>{v.masked_value}</code>
                    </td>
                    <td>{fmtTime(v.updated_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
      </Tabs>
    </section>
  );
}

/** Tool is one entry of a build's lock.tools, as the environment listed it at discovery. */
type Tool = {
  name: string;
  description: string;
  /** inputSchema is the JSON Schema of the tool's arguments. */
  inputSchema?: Schema;
  /** role is set on a hub's dispatcher: "setup" and "evaluate" (the platform calls them; agents
   * never see them) or "hub"; absent on a tool agents call. */
  role?: string;
};

/** Schema is the part of a JSON Schema the Tools tab reads. */
type Schema = {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
};

/** lockTools reads the tools a build serves from its lock ({tools: [{name, description,
 * input_schema, role}]}). */
function lockTools(lock: Record<string, unknown> | undefined): Tool[] {
  const raw = lock?.tools;
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((t: unknown) => {
    if (!t || typeof t !== "object") return [];
    const m = t as { name?: unknown; description?: unknown; input_schema?: unknown; role?: unknown };
    if (typeof m.name !== "string") return [];
    return [
      {
        name: m.name,
        description: typeof m.description === "string" ? m.description : "",
        inputSchema: m.input_schema && typeof m.input_schema === "object" ? (m.input_schema as Schema) : undefined,
        role: typeof m.role === "string" && m.role ? m.role : undefined,
      },
    ];
  });
}

/** typeOf says a schema's type in a few words: "string", "array of string", "one of a, b". */
function typeOf(s: Schema | undefined): string {
  if (!s) return "any";
  if (Array.isArray(s.enum) && s.enum.length > 0) return `one of ${s.enum.map((v) => JSON.stringify(v)).join(", ")}`;
  const alts = s.anyOf ?? s.oneOf;
  if (!s.type && alts) return alts.map(typeOf).join(" or ");
  const types = (Array.isArray(s.type) ? s.type : s.type ? [s.type] : []).filter((t) => t !== "null");
  if (types.length === 0) return "any";
  return types.map((t) => (t === "array" && s.items ? `array of ${typeOf(s.items)}` : t)).join(" or ");
}

/** Arguments lists a tool's arguments from its input schema: name, type, whether it is
 * required, and what it is for. */
function Arguments({ tool }: { tool: Tool }) {
  const props = Object.entries(tool.inputSchema?.properties ?? {});
  if (props.length === 0) return <span className="muted">none</span>;
  const required = new Set(tool.inputSchema?.required ?? []);
  return (
    <ul className="args" aria-label={`Arguments of ${tool.name}`}>
      {props.map(([name, p]) => (
        <li key={name}>
          <code>{name}</code> <span className="muted">{typeOf(p)}</span>
          {required.has(name) ? <strong className="required"> required</strong> : <span className="muted"> optional</span>}
          {p?.description && <> · {p.description}</>}
        </li>
      ))}
    </ul>
  );
}

/** roleNote says what a hub dispatcher is to an agent. */
function roleNote(role: string): string {
  if (role === "setup") return "setup: hidden from agents; the platform calls it to prepare a scenario";
  if (role === "evaluate") return "evaluate: hidden from agents; the platform calls it to score an attempt";
  if (role === "hub") return "hub: agents call its inner tools through it";
  return role;
}

/** Tools lists what the latest build's environment serves: the tools agents call, with their
 * arguments, then the hubs' dispatchers (setup and evaluate are hidden from agents). */
function Tools({ tools }: { tools: Tool[] }) {
  if (tools.length === 0) return <p>The latest build lists no tools (or there is no successful build yet).</p>;
  const agents = tools.filter((t) => !t.role);
  const hubs = tools.filter((t) => t.role);
  return (
    <>
      <h2>Tools agents call</h2>
      {agents.length === 0 ? (
        <p>None.</p>
      ) : (
        <table>
          <caption className="visually-hidden">Tools of the latest build</caption>
          <Head cols={["Tool", "Arguments", "Description"]} />
          <tbody>
            {agents.map((t) => (
              <tr key={t.name}>
                <td>
                  <code>{t.name}</code>
                </td>
                <td>
                  <Arguments tool={t} />
                </td>
                <td>{t.description || "–"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {hubs.length > 0 && (
        <>
          <h2>Hubs</h2>
          <p>Each dispatcher calls its hub's inner tools by name. Setup and evaluate are the platform's and hidden from agents; another hub is a tool agents call.</p>
          <table>
            <caption className="visually-hidden">Hub dispatchers of the latest build</caption>
            <Head cols={["Dispatcher", "Role", "Description"]} />
            <tbody>
              {hubs.map((t) => (
                <tr key={t.name}>
                  <td>
                    <code>{t.name}</code>
                  </td>
                  <td>{roleNote(t.role as string)}</td>
                  <td>{t.description || "–"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}

/** orNone is what a read answers, or null where it answers 404 (nothing of the kind yet). */
async function orNone<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (e) {
    if (e instanceof APIError && e.status === 404) return null;
    throw e;
  }
}

/** Certification shows a build's latest certification: per task, the oracle's passes, the idle
 * and random agents' rewards and the flags; followed while it runs. */
function Certification({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const { data, error } = usePoll(
    () => orNone(ok(api.GET("/v2/builds/{build_id}/certification", { params: { path: { build_id: id } } }))),
    [id],
    { intervalMs: 2000, live: (c) => c?.status === "running", onUnauthorized },
  );
  if (error) return <p role="alert" className="error">{error.message}</p>;
  if (data === undefined) return null;
  if (data === null)
    return (
      <p className="muted">
        Not certified: <code>proctor env certify {id} --taskset NAME</code> runs the oracle, an idle and a random agent on each task.
      </p>
    );
  return (
    <section aria-label="Certification">
      <h2>
        Certification: <Status value={data.status} />
      </h2>
      <p className="muted">
        The oracle {data.k}×, the idle and random agents and the tamper probe once per task, on this build (<code title={data.build_digest}>{shortDigest(data.build_digest)}</code>) · <a href={href({ page: "job", id: data.job_id })}>its job</a> ·{" "}
        {fmtTime(data.created_at)}
        {data.startup.p50_ms !== null &&
          data.startup.p99_ms !== null &&
          ` · environment start-up p50 ${Math.round(data.startup.p50_ms)} ms, p99 ${Math.round(data.startup.p99_ms)} ms over ${data.startup.samples} attempts`}
        {data.startup_by_provider
          .filter((p) => p.p50_ms !== null && p.p99_ms !== null)
          .map((p) => ` · on ${p.provider || "unrecorded"} sandboxes p50 ${Math.round(p.p50_ms as number)} ms, p99 ${Math.round(p.p99_ms as number)} ms (${p.samples})`)
          .join("")}
      </p>
      {data.tasks.length > 0 && (
        <table>
          <Head cols={["Task", "Oracle passes", "Idle", "Random", "Tamper probe", "Flags"]} />
          <tbody>
            {data.tasks.map((t) => (
              <tr key={t.task_version_id} className={t.flags.length > 0 ? "bad" : undefined}>
                <td>{t.task_name}</td>
                <td>
                  {t.oracle_passes}/{t.oracle_runs}
                </td>
                <td>{fmtReward(t.idle_reward)}</td>
                <td>{fmtReward(t.random_reward)}</td>
                <td>
                  {t.tamper
                    ? `${t.tamper.refused.length}/${t.tamper.tried.length} refused` +
                      (t.tamper.claimed.length > 0 ? `; claimed success via ${t.tamper.claimed.join(", ")} → ${fmtReward(t.tamper.reward)}` : "")
                    : "–"}
                </td>
                <td>{t.flags.join(", ") || "–"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** ReplayCheck shows a build's latest replay check: per replayed attempt, the reward before and
 * after, the first step whose tool result differs, the outcome, and its two traces side by side;
 * followed while it runs. */
function ReplayCheck({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const { data, error } = usePoll(
    () => orNone(ok(api.GET("/v2/builds/{build_id}/check", { params: { path: { build_id: id } } }))),
    [id],
    { intervalMs: 2000, live: (c) => c?.status === "running", onUnauthorized },
  );
  if (error) return <p role="alert" className="error">{error.message}</p>;
  if (data === undefined) return null;
  if (data === null)
    return (
      <p className="muted">
        Not checked against a job: <code>proctor env check {id} --against JOB</code> replays a finished job&apos;s attempts on this build.
      </p>
    );
  return (
    <section aria-label="Replay check">
      <h2>
        Replay check: <Status value={data.status} />
      </h2>
      <p className="muted">
        <a href={href({ page: "job", id: data.against_job_id })}>The job</a> replayed on this build by the replay model · <a href={href({ page: "job", id: data.job_id })}>its replays</a> ·{" "}
        {fmtTime(data.created_at)}
        {data.not_replayed.length > 0 && ` · ${data.not_replayed.length} attempts not replayed (${[...new Set(data.not_replayed.map((n) => n.reason))].join(", ")})`}
      </p>
      {data.attempts.length > 0 && (
        <table>
          <Head cols={["Task", "Reward before → after", "First different step", "Outcome", ""]} />
          <tbody>
            {data.attempts.map((a) => (
              <tr key={a.replay_trace_id} className={a.outcome !== "same" ? "bad" : undefined}>
                <td>{a.task_name}</td>
                <td>
                  {fmtReward(a.reward_before)} → {fmtReward(a.reward_after)}
                </td>
                <td>{a.first_diverging_step ?? "–"}</td>
                <td>{a.outcome.replace("_", " ")}</td>
                <td>
                  <a href={href({ page: "traces", a: a.source_trace_id, b: a.replay_trace_id })}>Traces side by side</a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** BuildLog shows a build's log, following it while the build runs. */
function BuildLog({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const { data, error } = usePoll(() => ok(api.GET("/v2/builds/{build_id}/logs", { params: { path: { build_id: id }, query: { limit: 1000 } } })), [id], {
    intervalMs: 1000,
    live: (l) => !l.done,
    onUnauthorized,
  });
  if (error) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  return (
    <>
      <h2>Build log</h2>
      <pre className="logs" aria-label="Build log">
        {(data.logs ?? []).map((l) => l.line).join("\n") || "(empty)"}
      </pre>
    </>
  );
}

/** SourceBrowser lists a build's source folder by folder and previews a file. */
function SourceBrowser({ buildId, onUnauthorized }: { buildId: string; onUnauthorized: () => void }) {
  const [dir, setDir] = useState("");
  const [file, setFile] = useState<string>();
  const listing = usePoll(
    () => ok(api.GET("/v2/builds/{build_id}/source", { params: { path: { build_id: buildId }, query: { path: dir, limit: 1000 } } })),
    [buildId, dir],
    { onUnauthorized },
  );
  const preview = usePoll(
    async () => (file ? ok(api.GET("/v2/builds/{build_id}/source/preview", { params: { path: { build_id: buildId }, query: { path: file } } })) : undefined),
    [buildId, file],
    { onUnauthorized },
  );
  const parts = dir ? dir.split("/") : [];
  return (
    <div className="source">
      <nav aria-label="Folder">
        <button type="button" className="linklike" onClick={() => (setDir(""), setFile(undefined))}>
          source
        </button>
        {parts.map((p, i) => (
          <span key={i}>
            {" / "}
            <button type="button" className="linklike" onClick={() => (setDir(parts.slice(0, i + 1).join("/")), setFile(undefined))}>
              {p}
            </button>
          </span>
        ))}
      </nav>
      {listing.error && <p role="alert" className="error">{listing.error.message}</p>}
      {listing.data && (
        <ul className="files" aria-label="Files">
          {listing.data.entries.map((e) => (
            <li key={e.path}>
              <button
                type="button"
                className="linklike"
                aria-current={e.path === file ? "true" : undefined}
                onClick={() => (e.type === "dir" ? (setDir(e.path), setFile(undefined)) : setFile(e.path))}
              >
                {e.type === "dir" ? `${e.name}/` : e.name}
              </button>
              {e.type === "file" && <span className="muted"> {e.size} bytes</span>}
            </li>
          ))}
        </ul>
      )}
      {preview.error && <p role="alert" className="error">{preview.error.message}</p>}
      {preview.data && (
        <>
          <h2>{preview.data.path}</h2>
          <pre className="logs" aria-label={`Contents of ${preview.data.path}`}>
            {preview.data.content}
          </pre>
        </>
      )}
    </div>
  );
}
