import { useEffect, useRef, useState } from "react";
import { api, ok, Unauthorized, type Schemas } from "../api/client";
import { fmtReward, fmtTime, shortDigest, terminalTrace } from "../format";
import { usePoll } from "../hooks";
import { href } from "../router";
import { Tabs } from "../tabs";
import { Status } from "../ui";
import { Trajectory, wordsOf } from "./Trajectory";

type Event = Schemas["TraceEvent"];

export function Trace({ id, signedIn, onUnauthorized }: { id: string; signedIn: boolean; onUnauthorized: () => void }) {
  const [trace, setTrace] = useState<Schemas["Trace"]>();
  const [events, setEvents] = useState<Event[]>([]);
  const [error, setError] = useState<string>();
  const [live, setLive] = useState(true);
  const [view, setView] = useState<"timeline" | "env" | "runner" | "related">("timeline");
  const since = useRef(-1); // the seq of the last event shown: -1 before any (seqs start at 0)

  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    since.current = -1;
    setEvents([]);
    setLive(true);
    const poll = async () => {
      try {
        const [t, page] = await Promise.all([
          ok(api.GET("/v2/trace/{trace_id}", { params: { path: { trace_id: id } } })),
          ok(api.GET("/v2/trace/{trace_id}/events", { params: { path: { trace_id: id }, query: { since_seq: since.current, include_superseded: true } } })),
        ]);
        if (stopped) return;
        setTrace(t);
        if (page.events.length > 0) setEvents((prev) => [...prev, ...page.events]);
        since.current = Math.max(since.current, page.latest_seq);
        if (terminalTrace.has(t.status) && page.events.length === 0) {
          setLive(false);
          return;
        }
        timer = window.setTimeout(poll, terminalTrace.has(t.status) ? 0 : 1000);
      } catch (e) {
        if (stopped) return;
        if (e instanceof Unauthorized) onUnauthorized();
        else setError((e as Error).message);
      }
    };
    void poll();
    return () => {
      stopped = true;
      if (timer) window.clearTimeout(timer);
    };
  }, [id, onUnauthorized]);

  // The environment and build (fixed once the sandbox starts) and the evaluation (there once the
  // attempt ends): read once the trace is there, and again when the attempt ends.
  const phase = !trace ? "loading" : terminalTrace.has(trace.status) ? "ended" : "running";
  const info = usePoll(
    async () => (phase === "loading" ? undefined : ok(api.GET("/v2/trace/{trace_id}/info", { params: { path: { trace_id: id } } }))),
    [id, phase],
    { onUnauthorized },
  );

  if (error && !trace) return <p role="alert" className="error">{error}</p>;
  if (!trace) return <p aria-busy="true">Loading…</p>;
  return (
    <section>
      <p>
        <a href={href({ page: "job", id: trace.job_id })}>← Job</a>
      </p>
      <h1>{trace.name || trace.id}</h1>
      <p>
        <Status value={trace.status} /> · try {trace.attempt} · stop {trace.stop_reason || "–"} · reward{" "}
        <strong data-testid="reward">{trace.status === "error" ? "none (it errored)" : fmtReward(trace.reward)}</strong>
        <Evaluation result={info.data?.evaluation_result} traceError={trace.error} /> · started {fmtTime(trace.start_time)}
        {live && <span className="live"> · following live</span>}
      </p>
      {info.data && <EnvironmentLine env={info.data.environment} />}
      {info.data?.agent && (
        <p data-testid="agent">
          agent {info.data.agent.name} · build {info.data.agent.build_version} · <code title={info.data.agent.digest}>{shortDigest(info.data.agent.digest)}</code>{" "}
          (a brought agent: its model and tool calls are the events below, its output is in the environment's logs)
        </p>
      )}
      {info.error && <p className="muted">The environment and the evaluation could not be read: {info.error.message}</p>}
      {trace.error && (
        <p id="trace-error" className="error" tabIndex={-1}>
          {trace.error}
        </p>
      )}
      {signedIn && (
        <p>
          <button type="button" className="secondary" onClick={() => downloadAnalysis(trace.id).catch((e: Error) => setError(e.message))}>
            Download the analysis bundle
          </button>
        </p>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <Tabs
        label="Trace views"
        tabs={[
          { key: "timeline", title: `Timeline (${events.length})` },
          { key: "env", title: "Environment logs" },
          { key: "runner", title: "Runner logs" },
          { key: "related", title: "Related attempts" },
        ]}
        selected={view}
        onSelect={setView}
      >
        {view === "timeline" && <Trajectory key={trace.id} events={events} traceError={trace.error} />}
        {view === "env" && <EnvLogs id={trace.id} live={live} onUnauthorized={onUnauthorized} />}
        {view === "runner" && <RunnerLogs id={trace.id} live={live} onUnauthorized={onUnauthorized} />}
        {view === "related" && <Related id={trace.id} onUnauthorized={onUnauthorized} />}
      </Tabs>
    </section>
  );
}

/** EnvironmentLine says which environment, and which build of it, the attempt ran (before the
 * sandbox starts: the build it will run, the environment's latest). */
function EnvironmentLine({ env }: { env: Schemas["TraceEnv"] | null }) {
  // null: its task names none, or the reader may not see it (signed out, a published job's).
  if (!env) return null;
  return (
    <p data-testid="environment">
      environment <a href={href({ page: "environment", id: env.id })}>{env.name}</a>
      {env.build_version !== null ? ` · build ${env.build_version}` : " · no build"}
      {env.build_digest && (
        <>
          {" · "}
          <code title={env.build_digest}>{shortDigest(env.build_digest)}</code>
        </>
      )}
    </p>
  );
}

/** Evaluation is why the reward is what it is, in the evaluation's own words: its content and,
 * when the platform could not read a reward from it, the reason (left out where the trace's
 * error, shown below, already says it). */
function Evaluation({ result, traceError }: { result: Record<string, unknown> | null | undefined; traceError: string }) {
  if (!result) return null;
  const content = typeof result.content === "string" ? wordsOf(result.content) : "";
  const reason = typeof result.reason === "string" && result.reason !== traceError ? result.reason.trim() : "";
  const words = [content, reason].filter(Boolean).join("; ");
  if (!words) return null;
  return (
    <>
      {" ("}
      <span className="evaluation" data-testid="evaluation">
        {words}
      </span>
      {")"}
    </>
  );
}

/** downloadAnalysis saves the attempt's analysis bundle (task, trajectory, logs) as JSON. */
async function downloadAnalysis(id: string) {
  const bundle = await ok(api.GET("/v2/trace/{trace_id}/analysis-context", { params: { path: { trace_id: id } } }));
  const url = URL.createObjectURL(new Blob([JSON.stringify(bundle, null, 2)], { type: "application/json" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = `trace-${id}-analysis.json`;
  a.click();
  URL.revokeObjectURL(url);
}

function EnvLogs({ id, live, onUnauthorized }: { id: string; live: boolean; onUnauthorized: () => void }) {
  const { data, error } = usePoll(
    () => ok(api.GET("/v2/trace/{trace_id}/env-logs", { params: { path: { trace_id: id }, query: { limit: 1000 } } })),
    [id],
    { intervalMs: 2000, live: () => live, onUnauthorized },
  );
  if (error) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  if (data.logs.length === 0) return <p>The environment wrote nothing to its output.</p>;
  return (
    <pre className="logs">
      {data.logs.map((l) => `${l.time} ${l.stream} ${l.log}`).join("\n")}
      {data.has_more && "\n…"}
    </pre>
  );
}

function RunnerLogs({ id, live, onUnauthorized }: { id: string; live: boolean; onUnauthorized: () => void }) {
  const { data, error } = usePoll(() => ok(api.GET("/v2/trace/{trace_id}/logs", { params: { path: { trace_id: id } } })), [id], {
    intervalMs: 2000,
    live: () => live,
    onUnauthorized,
  });
  if (error) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  return <pre className="logs">{data.logs || "No runner log."}</pre>;
}

function Related({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const { data, error } = usePoll(
    async () => {
      const get = (kind: "task" | "job") =>
        ok(api.GET("/v2/trace/{trace_id}/related", { params: { path: { trace_id: id }, query: { kind, limit: 50 } } }));
      const [task, job] = await Promise.all([get("task"), get("job")]);
      return { task: task ?? [], job: job ?? [] };
    },
    [id],
    { onUnauthorized },
  );
  if (error) return <p role="alert" className="error">{error.message}</p>;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const list = (rows: Schemas["RelatedTrace"][]) =>
    rows.length === 0 ? (
      <p>None.</p>
    ) : (
      <ul className="thumbs">
        {rows.map((r) => (
          <li key={r.id}>
            <a href={href({ page: "trace", id: r.id })}>{r.name || r.id}</a> <Status value={r.status} /> · reward {fmtReward(r.reward)} · job{" "}
            {r.job_name} · {fmtTime(r.created_at)}
          </li>
        ))}
      </ul>
    );
  return (
    <>
      <h2>The same task, in any job</h2>
      {list(data.task)}
      <h2>The same job</h2>
      {list(data.job)}
    </>
  );
}

