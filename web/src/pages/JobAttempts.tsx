// A job's attempts, read once and then filtered, grouped and counted here: the API pages a job's
// attempts by category only, and a researcher asks more of them (which errors, which stop
// reasons, which rewards, which task).
import { useMemo, useState } from "react";
import { type Schemas } from "../api/client";
import { fmtDuration, fmtReward, fmtUSD, shortId } from "../format";
import { href } from "../router";
import { Tabs } from "../tabs";
import { Head, Status } from "../ui";

export type Attempt = Schemas["Thumbnail"];

export const categories = ["errors", "failed", "successful", "live", "no_score", "all"] as const;
export type Category = (typeof categories)[number];

/** categoryOf puts an errored attempt in a category of its own: the API counts an error as a
 * failure at reward 0, which reads as the agent's fault when it was not. */
export function categoryOf(a: Attempt): Exclude<Category, "all"> {
  return a.status === "error" ? "errors" : a.category;
}

/** usefulCategory is the category a job's page opens on: what needs a look first. */
export function usefulCategory(counts: Record<Category, number>): Category {
  return (["errors", "failed", "live", "successful", "no_score"] as const).find((c) => counts[c] > 0) ?? "all";
}

export function countCategories(attempts: Attempt[]): Record<Category, number> {
  const counts: Record<Category, number> = { errors: 0, failed: 0, successful: 0, live: 0, no_score: 0, all: attempts.length };
  for (const a of attempts) counts[categoryOf(a)]++;
  return counts;
}

/** errorKey groups messages that differ only in ids and numbers (a step, a port, a trace id). */
export function errorKey(message: string): string {
  return (
    message
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, "…")
      .replace(/\d+/g, "#")
      .trim() || "(no message)"
  );
}

export type ErrorGroup = { key: string; message: string; variants: number; attempts: Attempt[] };

/** groupErrors groups the errored attempts by message, the largest group first; each shows its
 * most frequent wording. */
export function groupErrors(attempts: Attempt[]): ErrorGroup[] {
  const groups = new Map<string, Attempt[]>();
  for (const a of attempts) {
    if (a.status !== "error") continue;
    const k = errorKey(a.error);
    groups.set(k, [...(groups.get(k) ?? []), a]);
  }
  return [...groups.entries()]
    .map(([key, as]) => {
      const wordings = new Map<string, number>();
      for (const a of as) wordings.set(a.error, (wordings.get(a.error) ?? 0) + 1);
      const [message] = [...wordings.entries()].sort((x, y) => y[1] - x[1])[0];
      return { key, message: message || "(no message)", variants: wordings.size, attempts: as };
    })
    .sort((x, y) => y.attempts.length - x.attempts.length);
}

/** Filter narrows the attempts list; empty fields do not narrow. */
export type Filter = { task: string; status: string; stop: string; min: string; max: string; text: string; group: string };
export const noFilter: Filter = { task: "", status: "", stop: "", min: "", max: "", text: "", group: "" };

function matches(a: Attempt, f: Filter): boolean {
  if (f.task && a.task_id !== f.task) return false;
  if (f.status && a.status !== f.status) return false;
  if (f.stop && a.stop_reason !== f.stop) return false;
  if (f.group && (a.status !== "error" || errorKey(a.error) !== f.group)) return false;
  if (f.text && !a.error.toLowerCase().includes(f.text.toLowerCase())) return false;
  if (f.min !== "" || f.max !== "") {
    // An errored attempt has no reward to compare: the 0 the API records is not the agent's score.
    if (a.reward === null || a.status === "error") return false;
    if (f.min !== "" && a.reward < Number(f.min)) return false;
    if (f.max !== "" && a.reward > Number(f.max)) return false;
  }
  return true;
}

/** ErrorGroups lists a job's error messages with how many attempts ended with each. */
export function ErrorGroups({ groups, onShow }: { groups: ErrorGroup[]; onShow: (g: ErrorGroup) => void }) {
  return (
    <table>
      <caption className="visually-hidden">Errors, by message</caption>
      <Head cols={["Attempts", "Error", "First attempt"]} actions />
      <tbody>
        {groups.map((g) => (
          <tr key={g.key}>
            <td>{g.attempts.length}</td>
            <td>
              <span className="text">{g.message}</span>
              {g.variants > 1 && <span className="muted"> (and {g.variants - 1} similar)</span>}
            </td>
            <td>
              <a href={href({ page: "trace", id: g.attempts[0].id })}>{shortId(g.attempts[0].id)}</a>
            </td>
            <td>
              <button
                type="button"
                className="secondary"
                onClick={() => onShow(g)}
                aria-label={`Show ${g.attempts.length} attempt${g.attempts.length === 1 ? "" : "s"} of the error: ${g.message.slice(0, 80)}`}
              >
                Show {g.attempts.length}
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const pageRows = 200;

/** Attempts shows a job's attempts by category, narrowed by the filter, one row each with its
 * id, task, outcome, tool calls, duration and cost. */
export function Attempts({
  attempts,
  usage,
  category,
  onCategory,
  filter,
  onFilter,
}: {
  attempts: Attempt[];
  usage?: Map<string, Schemas["TraceUsage"]>;
  category: Category;
  onCategory: (c: Category) => void;
  filter: Filter;
  onFilter: (f: Filter) => void;
}) {
  const [shown, setShown] = useState(pageRows);
  const counts = useMemo(() => countCategories(attempts), [attempts]);
  const rows = useMemo(
    () => attempts.filter((a) => (category === "all" || categoryOf(a) === category) && matches(a, filter)),
    [attempts, category, filter],
  );
  return (
    <Tabs
      label="Attempts by category"
      tabs={categories.map((c) => ({ key: c, title: `${c.replace("_", " ")} (${counts[c]})` }))}
      selected={category}
      onSelect={(c) => {
        onCategory(c);
        setShown(pageRows);
      }}
    >
      <AttemptFilters attempts={attempts} filter={filter} onFilter={onFilter} />
      <p aria-live="polite" className="muted">
        {rows.length} of {counts[category]} attempts{rows.length > shown && `; the first ${shown} shown`}
      </p>
      {rows.length > 0 && (
        <table>
          <caption className="visually-hidden">Attempts</caption>
          <Head cols={["Attempt", "Task", "Status", "Stop", "Reward", "Tool calls", "Duration", "Cost", "Error"]} />
          <tbody>
            {rows.slice(0, shown).map((a) => (
              <AttemptRow key={a.id} a={a} usage={usage?.get(a.id)} />
            ))}
          </tbody>
        </table>
      )}
      {rows.length > shown && (
        <button type="button" className="secondary" onClick={() => setShown(shown + pageRows)}>
          Show {Math.min(pageRows, rows.length - shown)} more
        </button>
      )}
    </Tabs>
  );
}

function AttemptRow({ a, usage }: { a: Attempt; usage?: Schemas["TraceUsage"] }) {
  return (
    <tr>
      <td>
        <a href={href({ page: "trace", id: a.id })} title={a.id}>
          <code>{shortId(a.id)}</code>
        </a>
      </td>
      <td>{a.task_name ?? a.name}</td>
      <td>
        <Status value={a.status} />
      </td>
      <td>{a.stop_reason || "–"}</td>
      <td>{a.status === "error" ? "–" : fmtReward(a.reward)}</td>
      <td>{usage ? usage.agent_actions : "–"}</td>
      <td>{fmtDuration(a.start_time, a.end_time)}</td>
      <td>{usage ? fmtUSD(usage.inference_cost + usage.environment_cost) : "–"}</td>
      <td className="error-cell" title={a.error || undefined}>
        {a.error ? (a.error.length > 120 ? `${a.error.slice(0, 120)}…` : a.error) : ""}
      </td>
    </tr>
  );
}

/** AttemptFilters narrows the attempts by task, status, stop reason, reward range, error text and
 * error group; the choices offered are the values the job's attempts have. */
function AttemptFilters({ attempts, filter, onFilter }: { attempts: Attempt[]; filter: Filter; onFilter: (f: Filter) => void }) {
  const distinct = (pick: (a: Attempt) => string) => [...new Set(attempts.map(pick).filter(Boolean))].sort();
  const tasks = new Map(attempts.filter((a) => a.task_id).map((a) => [a.task_id as string, a.task_name ?? a.name]));
  const set = (k: keyof Filter) => (e: { target: { value: string } }) => onFilter({ ...filter, [k]: e.target.value });
  return (
    <div className="inline filters" role="group" aria-label="Filter attempts">
      <label>
        Task{" "}
        <select value={filter.task} onChange={set("task")}>
          <option value="">any</option>
          {[...tasks.entries()].map(([id, name]) => (
            <option key={id} value={id}>
              {name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Status{" "}
        <select value={filter.status} onChange={set("status")}>
          <option value="">any</option>
          {distinct((a) => a.status).map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </label>
      <label>
        Stop reason{" "}
        <select value={filter.stop} onChange={set("stop")}>
          <option value="">any</option>
          {distinct((a) => a.stop_reason).map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </label>
      <label>
        Reward from <input type="number" step="0.1" className="num" value={filter.min} onChange={set("min")} />
      </label>
      <label>
        to <input type="number" step="0.1" className="num" value={filter.max} onChange={set("max")} />
      </label>
      <label>
        Error contains <input type="search" value={filter.text} onChange={set("text")} />
      </label>
      {filter.group && (
        <span>
          error group <code>{filter.group.slice(0, 60)}</code>
        </span>
      )}
      {JSON.stringify(filter) !== JSON.stringify(noFilter) && (
        <button type="button" className="secondary" onClick={() => onFilter(noFilter)}>
          Clear filters
        </button>
      )}
    </div>
  );
}
