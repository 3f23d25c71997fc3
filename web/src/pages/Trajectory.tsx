// The trajectory of one attempt, one row per step: what the model said, the tools it called and
// what they answered, with the step's latency and tokens. Rows are collapsed by default and
// render their details only when opened, so a trace of a thousand events opens at once.
import DOMPurify from "dompurify";
import { marked } from "marked";
import { memo, useCallback, useDeferredValue, useEffect, useMemo, useState, type ReactNode } from "react";
import { type Schemas } from "../api/client";
import { fmtMs } from "../format";

type Event = Schemas["TraceEvent"];
type Image = Schemas["EventImage"];

/** Call is a tool call and the result that answered it. */
type Call = { call?: Event; result?: Event };

/** Step is one row: the events of one model step (its answer, its tool calls and their
 * results), or an event that belongs to no step (the system prompt, setup, the task, evaluate). */
export type Step = {
  key: string;
  label: string;
  events: Event[];
  assistant?: Event;
  calls: Call[];
  superseded: boolean;
  error: boolean;
  latencyMs?: number;
  modelMs?: number;
  tokens?: { input: number; output: number };
  images: Image[];
  /** haystack is the step's searchable text, lower-cased once. */
  haystack: string;
  /** tools are the names of the tools the step called, kinds its events' kinds (lower-cased). */
  tools: string[];
  kinds: string[];
};

const stepKinds = new Set(["assistant_message", "tool_call", "tool_result"]);

function span(e: Event): number | undefined {
  if (!e.ended_at) return undefined;
  const ms = Date.parse(e.ended_at) - Date.parse(e.started_at);
  return Number.isNaN(ms) ? undefined : Math.max(0, ms);
}

/** isError tells an event that reports a failure: an error event, a tool's error result, a
 * setup or evaluate call that failed. */
function isError(e: Event): boolean {
  const d = e.data ?? {};
  return e.kind === "error" || d.is_error === true || (d.result as { is_error?: boolean } | undefined)?.is_error === true;
}

/** toSteps groups a trace's events into rows, in the order they happened. */
export function toSteps(events: Event[]): Step[] {
  const byKey = new Map<string, Step>();
  for (const e of events) {
    const n = e.data?.step;
    const grouped = stepKinds.has(e.kind) && typeof n === "number";
    const key = grouped ? `${e.attempt}-s${n}` : `${e.attempt}-e${e.seq}`;
    let s = byKey.get(key);
    if (!s) {
      // Steps count from 1 for a reader; data.step counts from 0.
      s = { key, label: grouped ? `step ${(n as number) + 1}` : e.kind.replace(/_/g, " "), events: [], calls: [], superseded: false, error: false, images: [], haystack: "", tools: [], kinds: [] };
      byKey.set(key, s);
    }
    s.events.push(e);
    if (e.kind === "assistant_message") s.assistant = e;
    if (e.kind === "tool_call") s.calls.push({ call: e });
    if (e.kind === "tool_result") {
      const id = e.data?.call_id;
      const c = s.calls.find((x) => !x.result && x.call?.data?.call_id === id);
      if (c) c.result = e;
      else s.calls.push({ result: e });
    }
    if (e.images) s.images.push(...e.images);
  }
  const steps = [...byKey.values()];
  for (const s of steps) {
    s.superseded = s.events.every((e) => e.superseded);
    s.error = s.events.some(isError);
    const starts = s.events.map((e) => Date.parse(e.started_at)).filter((t) => !Number.isNaN(t));
    const ends = s.events.map((e) => (e.ended_at ? Date.parse(e.ended_at) : NaN)).filter((t) => !Number.isNaN(t));
    if (starts.length && ends.length) s.latencyMs = Math.max(0, Math.max(...ends) - Math.min(...starts));
    if (s.assistant) {
      s.modelMs = span(s.assistant);
      const u = s.assistant.data?.usage as { input_tokens?: number; output_tokens?: number } | undefined;
      if (u && (u.input_tokens || u.output_tokens)) s.tokens = { input: u.input_tokens ?? 0, output: u.output_tokens ?? 0 };
    }
    s.kinds = [...new Set(s.events.map((e) => e.kind))];
    s.tools = [...new Set(s.calls.map((c) => String(c.call?.data?.name ?? c.result?.data?.name ?? c.call?.text ?? "").toLowerCase()).filter(Boolean))];
    s.haystack = s.events
      .map((e) => `${e.kind} ${e.text} ${e.kind === "tool_call" ? JSON.stringify(e.data?.arguments ?? {}) : ""}${e.kind === "evaluate" ? evaluationWords(e.data?.result) : ""}`)
      .join("\n")
      .toLowerCase();
  }
  return steps;
}

/** Trajectory is the trace's steps with search, collapse/expand all and jumps to the first error
 * and to the end. */
export function Trajectory({ events, traceError }: { events: Event[]; traceError: string }) {
  const steps = useMemo(() => toSteps(events), [events]);
  const [query, setQuery] = useState("");
  const deferred = useDeferredValue(query.trim().toLowerCase());
  const [open, setOpen] = useState<ReadonlySet<string>>(() => new Set());
  const [jump, setJump] = useState<{ key: string; n: number }>();
  const search = useMemo(() => parseSearch(deferred), [deferred]);
  const shown = useMemo(() => (deferred ? steps.filter((s) => matches(s, search)) : steps), [steps, deferred, search]);
  const [at, setAt] = useState(-1); // the match last jumped to, in shown
  useEffect(() => setAt(-1), [deferred]);
  const firstError = steps.find((s) => s.error && !s.superseded) ?? steps.find((s) => s.error);
  const toggle = useCallback(
    (key: string) =>
      setOpen((prev) => {
        const next = new Set(prev);
        if (!next.delete(key)) next.add(key);
        return next;
      }),
    [],
  );
  const jumpTo = (key: string) => {
    setQuery("");
    setOpen((prev) => new Set(prev).add(key));
    setJump((j) => ({ key, n: (j?.n ?? 0) + 1 }));
  };
  useEffect(() => {
    if (!jump) return;
    const el = document.getElementById(`step-${jump.key}`);
    el?.scrollIntoView({ block: "center" });
    el?.querySelector<HTMLButtonElement>(".step-head")?.focus({ preventScroll: true });
  }, [jump]);
  const last = steps[steps.length - 1];
  const step = (by: number) => {
    if (shown.length === 0) return;
    const next = at < 0 ? (by > 0 ? 0 : shown.length - 1) : (at + by + shown.length) % shown.length;
    setAt(next);
    setOpen((prev) => new Set(prev).add(shown[next].key));
    setJump((j) => ({ key: shown[next].key, n: (j?.n ?? 0) + 1 }));
  };
  const totals = useMemo(() => steps.reduce((t, s) => (s.tokens && !s.superseded ? { input: t.input + s.tokens.input, output: t.output + s.tokens.output } : t), { input: 0, output: 0 }), [steps]);
  return (
    <>
      <div className="inline trajectory-tools" role="group" aria-label="Trajectory tools">
        <label>
          Search steps{" "}
          <input
            type="search"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            title='Words match whole words of the text, calls and results; tool:NAME keeps the steps that call that tool, kind:KIND those with an event of that kind (tool_result, error…); "a phrase" matches as written'
            placeholder="words, tool:NAME, kind:KIND"
          />
        </label>
        {deferred && (
          <>
            <button type="button" className="secondary" disabled={shown.length === 0} onClick={() => step(-1)} aria-label="Previous match">
              ↑
            </button>
            <button type="button" className="secondary" disabled={shown.length === 0} onClick={() => step(1)} aria-label="Next match">
              ↓
            </button>
          </>
        )}
        <button type="button" className="secondary" onClick={() => setOpen(new Set(shown.map((s) => s.key)))}>
          Expand all
        </button>
        <button type="button" className="secondary" onClick={() => setOpen(new Set())}>
          Collapse all
        </button>
        <button
          type="button"
          className="secondary"
          disabled={!firstError && !traceError}
          onClick={() => (firstError ? jumpTo(firstError.key) : document.getElementById("trace-error")?.focus())}
        >
          Jump to error
        </button>
        <button type="button" className="secondary" disabled={!last} onClick={() => last && jumpTo(last.key)}>
          Jump to end
        </button>
      </div>
      <p className="muted" aria-live="polite">
        {deferred
          ? `${shown.length} of ${steps.length} steps match${at >= 0 ? ` · match ${at + 1} of ${shown.length}` : ""}`
          : `${steps.length} steps, ${events.length} events`}
        {totals.input + totals.output > 0 && ` · ${totals.input.toLocaleString()} tokens in, ${totals.output.toLocaleString()} out`}
      </p>
      <ol className="steps" aria-label="Trajectory">
        {shown.map((s) => (
          <StepRow key={s.key} step={s} expanded={open.has(s.key)} onToggle={toggle} query={search.highlight} />
        ))}
      </ol>
    </>
  );
}

/** Search is a parsed search: whole words and phrases to find in a step's text, and the tools and
 * event kinds it must have. */
type Search = { words: RegExp[]; tools: string[]; kinds: string[]; highlight: string };

export function parseSearch(q: string): Search {
  const out: Search = { words: [], tools: [], kinds: [], highlight: "" };
  const escape = (w: string) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  for (const m of q.matchAll(/"([^"]+)"|(\S+)/g)) {
    const [, phrase, word] = m;
    if (phrase) {
      out.words.push(new RegExp(escape(phrase)));
      out.highlight ||= phrase;
    } else if (word.startsWith("tool:") && word.length > 5) out.tools.push(word.slice(5));
    else if (word.startsWith("kind:") && word.length > 5) out.kinds.push(word.slice(5));
    else {
      out.words.push(new RegExp(`(^|[^\\p{L}\\p{N}_])${escape(word)}($|[^\\p{L}\\p{N}_])`, "u"));
      out.highlight ||= word;
    }
  }
  return out;
}

/** matches says whether a step has everything a search asks for. */
export function matches(s: Step, q: Search): boolean {
  return (
    q.tools.every((t) => s.tools.includes(t)) &&
    q.kinds.every((k) => s.kinds.some((kind) => kind === k || kind.startsWith(k))) &&
    q.words.every((w) => w.test(s.haystack))
  );
}

/** StepRow is one step: a line that says what happened, and its details when opened. It
 * re-renders only when its own step, state or the search changes. */
const StepRow = memo(function StepRow({ step, expanded, onToggle, query }: { step: Step; expanded: boolean; onToggle: (key: string) => void; query: string }) {
  const s = step;
  const first = s.events[0];
  const last = s.events[s.events.length - 1];
  return (
    <li id={`step-${s.key}`} className={`step step-${first.kind}${s.error ? " step-error" : ""}${s.superseded ? " superseded" : ""}`}>
      <button type="button" className="step-head" aria-expanded={expanded} onClick={() => onToggle(s.key)}>
        <span className="seq">{first.seq === last.seq ? `#${first.seq}` : `#${first.seq}–${last.seq}`}</span>
        <span className="kind">{s.label}</span>
        {s.latencyMs !== undefined && (
          <span className="metric" title={s.modelMs !== undefined ? `model ${fmtMs(s.modelMs)}` : undefined}>
            {fmtMs(s.latencyMs)}
          </span>
        )}
        {s.tokens && (
          <span className="metric" title="input tokens → output tokens">
            {s.tokens.input.toLocaleString()} → {s.tokens.output.toLocaleString()} tok
          </span>
        )}
        {s.error && <span className="status status-error">error</span>}
        {s.superseded && <span className="muted">superseded: an earlier try</span>}
      </button>
      {!expanded && <StepSummary step={s} query={query} />}
      {!expanded && s.images.length > 0 && <Images images={s.images} thumb />}
      {expanded && <StepDetails step={s} />}
    </li>
  );
});

/** oneLine is the first line of a text, cut to n characters. */
function oneLine(text: string, n = 200): string {
  const line = text.trimStart().split("\n", 1)[0];
  const more = line.length > n || text.trim().length > line.length;
  return line.slice(0, n) + (more ? " …" : "");
}

function compactArgs(args: unknown): string {
  const json = JSON.stringify(args ?? {});
  return json.length > 120 ? `${json.slice(0, 120)}…` : json;
}

/** StepSummary is a collapsed step's one or two lines. */
function StepSummary({ step: s, query }: { step: Step; query: string }) {
  const lines: ReactNode[] = [];
  const e = s.events[0];
  if (s.assistant) {
    const text = s.assistant.text.trim();
    if (text) lines.push(<Mark key="a" text={oneLine(text)} query={query} />);
    else if (s.calls.length === 0) lines.push(<span key="a" className="muted">(an empty answer)</span>);
  }
  s.calls.forEach((c, i) => {
    const name = String(c.call?.data?.name ?? c.result?.data?.name ?? c.call?.text ?? "tool");
    const result = c.result?.text ?? "";
    lines.push(
      <span key={`c${i}`} className="call">
        <Mark text={`${name}(${compactArgs(c.call?.data?.arguments)})`} query={query} />
        {c.result && (
          <>
            {" → "}
            <Mark text={oneLine(result, 160) || "(no text)"} query={query} />
          </>
        )}
      </span>,
    );
  });
  if (!stepKinds.has(e.kind)) {
    if (e.kind === "evaluate") {
      const words = evaluationWords(e.data?.result);
      lines.push(<Mark key="e" text={oneLine(`${e.text} → reward ${String(e.data?.reward ?? "–")}${words ? `: ${words}` : ""}`, 240)} query={query} />);
    }
    else if (e.kind === "system_message" && !e.text) lines.push(<span key="e" className="muted">(no system prompt)</span>);
    else if (e.text) lines.push(<Mark key="e" text={oneLine(e.text)} query={query} />);
  }
  if (lines.length === 0) return null;
  return <div className="step-summary">{lines}</div>;
}

/** Mark shows text with the search's matches highlighted. */
function Mark({ text, query }: { text: string; query: string }) {
  if (!query) return <>{text}</>;
  const lower = text.toLowerCase();
  const out: ReactNode[] = [];
  let at = 0;
  for (let i = lower.indexOf(query); i >= 0; i = lower.indexOf(query, i + query.length)) {
    out.push(text.slice(at, i), <mark key={i}>{text.slice(i, i + query.length)}</mark>);
    at = i + query.length;
  }
  out.push(text.slice(at));
  return <>{out}</>;
}

/** StepDetails is an opened step: every event in full. */
function StepDetails({ step: s }: { step: Step }) {
  return (
    <div className="step-details">
      {s.events.map((e) => (
        <EventDetails key={`${e.attempt}-${e.seq}`} e={e} head={s.events.length > 1} />
      ))}
    </div>
  );
}

/** evaluationWords is what an evaluate call said of the attempt, in its own words: the
 * structured content's `content` (an EvaluationResult's explanation), else the result's text,
 * unless that text is only the JSON of a result that gives no explanation. "" when it said none. */
export function evaluationWords(result: unknown): string {
  const r = result as { structured?: { content?: unknown }; text?: unknown } | undefined;
  if (typeof r?.structured?.content === "string") return r.structured.content.trim();
  return typeof r?.text === "string" ? wordsOf(r.text) : "";
}

/** wordsOf is a text's explanation: the text itself, or the `content` of a JSON object (a tool's
 * typed result is sent as its JSON text too); "" for a JSON object without one. */
export function wordsOf(text: string): string {
  const t = text.trim();
  if (!t.startsWith("{")) return t;
  try {
    const v = JSON.parse(t) as { content?: unknown };
    return typeof v.content === "string" ? v.content.trim() : "";
  } catch {
    return t;
  }
}

/** callOutcome is what a setup or evaluate call answered: its structured content, else its text
 * (the whole MCP result stays under "raw data"). */
function callOutcome(result: unknown): unknown {
  const r = result as { structured?: unknown; text?: string; is_error?: boolean } | undefined;
  if (!r) return null;
  if (r.structured !== undefined) return r.structured;
  if (r.text === undefined) return null;
  try {
    return JSON.parse(r.text);
  } catch {
    return r.text;
  }
}

function EventDetails({ e, head }: { e: Event; head: boolean }) {
  const data = e.data ?? {};
  const [raw, setRaw] = useState(false);
  const markdown = e.kind === "user_message" || e.kind === "assistant_message" || e.kind === "system_message";
  const calls = (data.message as { tool_calls?: unknown[] } | undefined)?.tool_calls;
  // Within a step's heading line: a call's arguments that fit on it, and the raw data's toggle.
  const inlineArgs = head && e.kind === "tool_call" ? compact(data.arguments ?? {}, 80) : undefined;
  let body: ReactNode;
  if (e.kind === "tool_call") body = inlineArgs === undefined && <JsonView value={data.arguments ?? {}} label={`Arguments of ${e.text}`} />;
  else if (e.kind === "assistant_message" && !e.text && head && calls?.length) body = null; // its calls follow in the step
  else if (markdown && e.text) body = <div className="md" dangerouslySetInnerHTML={{ __html: DOMPurify.sanitize(marked.parse(e.text, { async: false })) }} />;
  else if (e.kind === "assistant_message") {
    body = <p className="muted">{calls ? `(no text; ${calls.length} tool call${calls.length === 1 ? "" : "s"})` : "(an empty answer)"}</p>;
  } else if (e.kind === "evaluate") body = <JsonView value={{ reward: data.reward ?? null, result: callOutcome(data.result) }} label={`Evaluation ${e.text}`} />;
  else if (e.kind === "setup") body = <JsonView value={{ arguments: (data.call as { arguments?: unknown } | undefined)?.arguments ?? null, result: callOutcome(data.result) }} label={`Setup ${e.text}`} />;
  else if (e.text) body = <Text text={e.text} />;
  return (
    <div className={`event event-${e.kind}`}>
      {head && (
        <div className="event-head">
          <span className="seq">#{e.seq}</span> <span className="kind">{e.kind.replace(/_/g, " ")}</span>
          {(e.kind === "tool_call" || e.kind === "tool_result") && data.name != null && <code className="tool-name"> {String(data.name)}</code>}
          {inlineArgs !== undefined && <code aria-label={`Arguments of ${e.text}`}> {inlineArgs}</code>}
          {e.kind === "assistant_message" && !e.text && calls?.length ? <span className="muted"> · no text, {calls.length} tool call{calls.length === 1 ? "" : "s"}</span> : null}
          {Object.keys(data).length > 0 && (
            <>
              {" "}
              <button type="button" className="linklike raw-toggle" aria-expanded={raw} onClick={() => setRaw((r) => !r)}>
                raw data
              </button>
            </>
          )}
          {span(e) !== undefined && <span className="muted"> · {fmtMs(span(e) as number)}</span>}
        </div>
      )}
      {e.kind === "tool_result" && data.refused === true && <p className="error">Refused: the call never reached a tool (one the agent was not offered, or arguments that are no JSON object).</p>}
      {e.kind === "tool_result" && data.is_error === true && data.refused !== true && <p className="error">The tool reported an error.</p>}
      {e.kind === "assistant_message" && data.sent != null && <Sent sent={data.sent as SentRequest} />}
      {body}
      {e.images && e.images.length > 0 && <Images images={e.images} />}
      {!head && Object.keys(data).length > 0 && (
        <details>
          <summary>raw data</summary>
          <pre>{JSON.stringify(data, null, 2)}</pre>
        </details>
      )}
      {head && raw && <pre>{JSON.stringify(data, null, 2)}</pre>}
    </div>
  );
}

/** SentRequest is what a brought agent sent the model in a call (AssistantEventData.sent):
 * the messages after the first `kept` of its previous request, and its tools when they changed. */
type SentRequest = {
  kept: number;
  messages: { role: string; content?: string; tool_call_id?: string; tool_calls?: { name: string }[]; images?: unknown[] }[] | null;
  tools?: { name: string }[] | null;
};

/** Sent shows what a brought agent sent the model before this answer: what the model saw. */
function Sent({ sent }: { sent: SentRequest }) {
  const messages = sent.messages ?? [];
  const n = messages.length;
  return (
    <details className="sent">
      <summary>
        What the agent sent: {sent.kept > 0 ? `${sent.kept} message${sent.kept === 1 ? "" : "s"} as before, then ` : ""}
        {n} new message{n === 1 ? "" : "s"}
        {sent.tools != null ? ` · ${sent.tools.length} tool${sent.tools.length === 1 ? "" : "s"} offered` : ""}
      </summary>
      {messages.map((m, i) => (
        <div key={i} className="sent-message">
          <span className="kind">{m.role}</span>
          {m.tool_call_id && <span className="muted"> · result of {m.tool_call_id}</span>}
          {m.tool_calls && m.tool_calls.length > 0 && <span className="muted"> · calls {m.tool_calls.map((c) => c.name).join(", ")}</span>}
          {m.images && m.images.length > 0 && <span className="muted"> · {m.images.length} image{m.images.length === 1 ? "" : "s"}</span>}
          {m.content && <Text text={m.content} />}
        </div>
      ))}
      {sent.tools != null && sent.tools.length > 0 && <p className="muted">Tools: {sent.tools.map((t) => t.name).join(", ")}</p>}
    </details>
  );
}

/** Text shows a tool's text: JSON as a tree whose multi-line strings keep their line breaks,
 * anything else as it is. */
function Text({ text }: { text: string }) {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return <div className="text">{text}</div>;
  }
  if (v !== null && typeof v === "object") return <JsonView value={v} />;
  if (typeof v === "string") return <div className="text">{v}</div>;
  return <div className="text">{text}</div>;
}

/** JsonView prints a JSON value indented, with each string that holds line breaks shown as its
 * lines (a board, a file, a stack trace) rather than as one escaped line. */
export function JsonView({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre className="json" aria-label={label}>
      {renderJson(value, "")}
    </pre>
  );
}

/** inlineWidth is how wide a value may be written on one line: arrays of numbers (a board, a
 * vector) and small objects stay on the line of their key rather than taking a line each. */
const inlineWidth = 100;

/** compact is a value's JSON on one line, with a space after commas and colons; undefined when
 * it holds a string with line breaks (shown as lines) or runs past width. */
function compact(v: unknown, width: number): string | undefined {
  if (typeof v === "string") return v.includes("\n") ? undefined : JSON.stringify(v);
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  const parts: string[] = [];
  let len = 2;
  for (const [k, x] of Array.isArray(v) ? v.map((x, i) => [i, x] as const) : Object.entries(v as Record<string, unknown>)) {
    const c = compact(x, width - len);
    if (c === undefined) return undefined;
    const part = Array.isArray(v) ? c : `${JSON.stringify(k)}: ${c}`;
    len += part.length + 2;
    if (len > width) return undefined;
    parts.push(part);
  }
  return Array.isArray(v) ? `[${parts.join(", ")}]` : `{${parts.join(", ")}}`;
}

/** inline is a value on one line as a node, its strings with line breaks as blocks of lines in
 * it (a todo whose title has two lines takes two lines, not seven), with the width its widest
 * line takes; undefined past width. */
function inline(v: unknown, width: number): { node: ReactNode; width: number } | undefined {
  if (typeof v === "string" && v.includes("\n")) {
    const w = Math.max(...v.split("\n").map((l) => l.length)) + 2;
    return w <= width ? { node: <span className="lines">{v}</span>, width: w } : undefined;
  }
  if (v === null || typeof v !== "object") {
    const c = compact(v, width);
    return c === undefined ? undefined : { node: c, width: c.length };
  }
  const nodes: ReactNode[] = [];
  let used = 2;
  const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v as Record<string, unknown>);
  for (const [i, [k, x]] of entries.entries()) {
    const key = Array.isArray(v) ? "" : `${JSON.stringify(k)}: `;
    const part = inline(x, width - used - key.length);
    if (part === undefined) return undefined;
    used += key.length + part.width + 2;
    if (used > width) return undefined;
    nodes.push(
      <span key={k}>
        {i > 0 && ", "}
        {key}
        {part.node}
      </span>,
    );
  }
  return { node: <>{Array.isArray(v) ? "[" : "{"}{nodes}{Array.isArray(v) ? "]" : "}"}</>, width: used };
}

function renderJson(v: unknown, indent: string): ReactNode {
  if (typeof v === "string") return v.includes("\n") ? <span className="lines">{v}</span> : JSON.stringify(v);
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  const one = inline(v, inlineWidth - indent.length);
  if (one !== undefined) return one.node;
  const inner = `${indent}  `;
  if (Array.isArray(v)) {
    if (v.length === 0) return "[]";
    return (
      <>
        {"[\n"}
        {v.map((x, i) => (
          <span key={i}>
            {inner}
            {renderJson(x, inner)}
            {i < v.length - 1 ? ",\n" : "\n"}
          </span>
        ))}
        {`${indent}]`}
      </>
    );
  }
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return "{}";
  return (
    <>
      {"{\n"}
      {entries.map(([k, x], i) => (
        <span key={k}>
          {inner}
          {JSON.stringify(k)}: {renderJson(x, inner)}
          {i < entries.length - 1 ? ",\n" : "\n"}
        </span>
      ))}
      {`${indent}}`}
    </>
  );
}

/** Images shows a tool result's images, as the model was shown them; one that was not kept says so. */
function Images({ images, thumb }: { images: Image[]; thumb?: boolean }) {
  return (
    <div className="images">
      {images.map((im, i) =>
        im.url ? (
          <img
            key={`${im.sha256}-${i}`}
            src={im.url}
            alt={`image ${i + 1} the tool returned (${im.mime_type}, ${im.size.toLocaleString()} bytes)`}
            className={thumb ? "shot thumb" : "shot"}
            loading="lazy"
          />
        ) : (
          <span key={`${im.sha256}-${i}`} className="muted">
            (an image, {im.mime_type}, {im.size.toLocaleString()} bytes, was not kept)
          </span>
        ),
      )}
    </div>
  );
}
