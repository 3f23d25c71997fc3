import { api, ok, type Schemas } from "../api/client";
import { fmtReward } from "../format";
import { usePoll } from "../hooks";
import { href } from "../router";
import { Head } from "../ui";
import { Trace } from "./Trace";

type Comparison = Schemas["JobComparison"];

const reasons: Record<string, string> = {
  not_run: "not run by the other job",
  other_version: "the other job ran another version",
  other_build: "the other job ran another environment build",
};

function plural(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? "" : "s"}`;
}

function signed(x: number): string {
  return (x >= 0 ? "+" : "−") + Math.abs(x).toFixed(3);
}

/** Compare shows two jobs side by side, task by task: GET /v2/jobs/compare. */
export function Compare({ a, b, onUnauthorized }: { a: string; b: string; onUnauthorized: () => void }) {
  const { data, error } = usePoll(() => ok(api.GET("/v2/jobs/compare", { params: { query: { a, b } } })), [a, b], { onUnauthorized });
  return (
    <section>
      <h1>Comparison</h1>
      {error && (
        <p role="alert" className="error">
          {error.message}
        </p>
      )}
      {!data && !error && <p aria-busy="true">Loading…</p>}
      {data && <ComparisonView c={data} />}
    </section>
  );
}

function ComparisonView({ c }: { c: Comparison }) {
  return (
    <>
      <dl className="summary">
        <dt>A</dt>
        <dd>
          <a href={href({ page: "job", id: c.a.id })}>{c.a.name || c.a.id}</a> · {plural(c.a.scored_attempts, "scored attempt")}
          {c.a.unscored_attempts > 0 && `, ${c.a.unscored_attempts} left out`}
        </dd>
        <dt>B</dt>
        <dd>
          <a href={href({ page: "job", id: c.b.id })}>{c.b.name || c.b.id}</a> · {plural(c.b.scored_attempts, "scored attempt")}
          {c.b.unscored_attempts > 0 && `, ${c.b.unscored_attempts} left out`}
        </dd>
        <dt>Mean reward</dt>
        <dd data-testid="means">
          {fmtReward(c.a.mean_reward)} → {fmtReward(c.b.mean_reward)} over {c.paired_tasks} paired tasks: difference{" "}
          <strong>{signed(c.mean_difference)}</strong> (95% interval {signed(c.ci95.low)} to {signed(c.ci95.high)}, paired bootstrap)
        </dd>
        <dt>Sign test</dt>
        <dd>
          B better on {c.sign_test.b_better}, A on {c.sign_test.a_better}, {c.sign_test.ties} tied: p = {c.sign_test.p_value.toFixed(4)}
        </dd>
        <dt>Pass rates</dt>
        <dd>
          {c.pass_at_k.map((k, i) => (
            <span key={k.k}>
              pass@{k.k} {fmtReward(k.a)} → {fmtReward(k.b)}, pass^{k.k} {fmtReward(c.pass_hat_k[i].a)} → {fmtReward(c.pass_hat_k[i].b)}
              {i < c.pass_at_k.length - 1 ? "; " : ""}
            </span>
          ))}{" "}
          (an attempt passes at reward ≥ {c.pass_threshold})
        </dd>
      </dl>
      <table>
        <caption>
          Paired tasks by their difference, largest first; {c.flipped_tasks} flipped
        </caption>
        <Head cols={["Task", "A mean (attempts)", "B mean (attempts)", "Difference", "Flip"]} actions />
        <tbody>
          {c.tasks.map((t) => (
            <tr key={`${t.task_id}/${t.task_version_id}/${t.environment_digest}`} className={t.flip ? `flip flip-${t.flip}` : undefined}>
              <td>{t.task_name}</td>
              <td>
                {fmtReward(t.a.mean_reward)} ({t.a.attempts})
              </td>
              <td>
                {fmtReward(t.b.mean_reward)} ({t.b.attempts})
              </td>
              <td>{signed(t.delta)}</td>
              <td>{t.flip}</td>
              <td>
                {t.flip && t.a.trace_ids.length > 0 && t.b.trace_ids.length > 0 && (
                  <a href={href({ page: "traces", a: t.a.trace_ids[0], b: t.b.trace_ids[0] })}>Traces side by side</a>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {c.unpaired.length > 0 && (
        <>
          <h2>Not paired</h2>
          <ul>
            {c.unpaired.map((u) => (
              <li key={`${u.job}/${u.task_id}`}>
                {u.task_name} (in {u.job.toUpperCase()}): {reasons[u.reason]}
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}

/** TracesSideBySide shows two attempts next to each other, A on the left. */
export function TracesSideBySide({ a, b, signedIn, onUnauthorized }: { a: string; b: string; signedIn: boolean; onUnauthorized: () => void }) {
  return (
    <div className="side-by-side">
      <div aria-label="Attempt A" role="region">
        <p className="side-label">A, the baseline</p>
        <Trace id={a} signedIn={signedIn} onUnauthorized={onUnauthorized} />
      </div>
      <div aria-label="Attempt B" role="region">
        <p className="side-label">B</p>
        <Trace id={b} signedIn={signedIn} onUnauthorized={onUnauthorized} />
      </div>
    </div>
  );
}
