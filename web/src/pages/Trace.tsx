import DOMPurify from "dompurify";
import { marked } from "marked";
import { useEffect, useRef, useState } from "react";
import { api, ok, Unauthorized, type Schemas } from "../api/client";
import { fmtReward, fmtTime, terminalTrace } from "../format";
import { href } from "../router";
import { Status } from "../ui";

type Event = Schemas["TraceEvent"];

export function Trace({ id, onUnauthorized }: { id: string; onUnauthorized: () => void }) {
  const [trace, setTrace] = useState<Schemas["Trace"]>();
  const [events, setEvents] = useState<Event[]>([]);
  const [error, setError] = useState<string>();
  const [live, setLive] = useState(true);
  const since = useRef(0);

  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    since.current = 0;
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
        <strong data-testid="reward">{fmtReward(trace.reward)}</strong> · started {fmtTime(trace.start_time)}
        {live && <span className="live"> · following live</span>}
      </p>
      {trace.error && <p className="error">{trace.error}</p>}
      <ol className="timeline" aria-label="Trajectory">
        {events.map((e) => (
          <EventItem key={`${e.attempt}-${e.seq}`} e={e} />
        ))}
      </ol>
    </section>
  );
}

function EventItem({ e }: { e: Event }) {
  const markdown = e.kind === "user_message" || e.kind === "assistant_message" || e.kind === "system_message";
  const data = e.data ?? {};
  let summary: string | undefined;
  if (e.kind === "tool_call") summary = `${e.text}(${JSON.stringify(data.arguments ?? {})})`;
  else if (e.kind === "evaluate") summary = `${e.text} → reward ${String(data.reward ?? "–")}`;
  else if (e.kind === "assistant_message" && !e.text) {
    const calls = (data.message as { tool_calls?: unknown[] } | undefined)?.tool_calls;
    summary = calls ? `(${calls.length} tool call${calls.length === 1 ? "" : "s"})` : "(empty)";
  } else if (e.kind === "system_message" && !e.text) summary = "(no system prompt)";
  return (
    <li className={`event event-${e.kind}${e.superseded ? " superseded" : ""}`}>
      <div className="event-head">
        <span className="seq">{e.seq}</span> <span className="kind">{e.kind.replace(/_/g, " ")}</span>
        {e.superseded && <span className="muted"> (superseded: an earlier try)</span>}
      </div>
      {summary !== undefined && <div className="text">{summary}</div>}
      {summary === undefined && markdown && e.text && (
        <div className="md" dangerouslySetInnerHTML={{ __html: DOMPurify.sanitize(marked.parse(e.text, { async: false })) }} />
      )}
      {summary === undefined && !markdown && e.text && <Text text={e.text} />}
      <Images data={data} />
      {Object.keys(data).length > 0 && (
        <details>
          <summary>data</summary>
          <pre>{JSON.stringify(data, null, 2)}</pre>
        </details>
      )}
    </li>
  );
}

/** Text shows a tool's text; JSON is pretty-printed, and folded when long. */
function Text({ text }: { text: string }) {
  let pretty: string | undefined;
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === "object") pretty = JSON.stringify(v, null, 2);
  } catch {
    // not JSON: shown as it is
  }
  if (pretty === undefined) return <div className="text">{text}</div>;
  if (pretty.split("\n").length <= 12) return <pre>{pretty}</pre>;
  return (
    <details>
      <summary className="text">{text.slice(0, 160)}…</summary>
      <pre>{pretty}</pre>
    </details>
  );
}

/** Images shows the image content blocks an event's data carries (a tool's screenshots). */
function Images({ data }: { data: Record<string, unknown> | undefined }) {
  const out: { src: string; key: string }[] = [];
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}.${i}`));
    else if (v && typeof v === "object") {
      const o = v as Record<string, unknown>;
      if (o.type === "image" && typeof o.data === "string" && typeof o.mimeType === "string" && /^image\/(png|jpeg|gif|webp)$/.test(o.mimeType))
        out.push({ src: `data:${o.mimeType};base64,${o.data}`, key: path });
      else for (const [k, x] of Object.entries(o)) walk(x, `${path}.${k}`);
    }
  };
  walk(data, "");
  return (
    <>
      {out.map((i) => (
        <img key={i.key} src={i.src} alt="an image the tool returned" className="shot" />
      ))}
    </>
  );
}
