import { useState } from "react";
import { api, ok, type Schemas } from "../api/client";
import { fmtTime, fmtUSD } from "../format";
import { useAction, usePoll } from "../hooks";
import { DeleteButton, Head } from "../ui";

export function Models({ onUnauthorized }: { onUnauthorized: () => void }) {
  const { data, error } = usePoll(() => ok(api.GET("/v2/models", { params: { query: { limit: 500 } } })), [], { onUnauthorized });
  return (
    <section>
      <h1>Models</h1>
      {error && <p role="alert" className="error">{error.message}</p>}
      {data && (
        <table>
          <Head cols={["Model", "Name", "Provider", "Calls", "Context window", "Checkpoints"]} />
          <tbody>
            {data.items.map((m) => (
              <tr key={m.id}>
                <td>
                  <code>{m.model_name}</code>
                  {m.fork_of_model_name && <div className="muted">fork of {m.fork_of_model_name}</div>}
                </td>
                <td>{m.name}</td>
                <td>{m.provider}</td>
                <td>{m.inference_count}</td>
                <td>{m.context_window || "–"}</td>
                <td>{m.checkpoint_count}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function Secrets({ onUnauthorized }: { onUnauthorized: () => void }) {
  const secrets = usePoll(() => ok(api.GET("/v2/member-secrets")), [], { onUnauthorized });
  const byok = usePoll(() => ok(api.GET("/v2/byok-credentials")), [], { onUnauthorized });
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [provider, setProvider] = useState<"" | "openai" | "anthropic">("");
  const [byokProvider, setByokProvider] = useState<"openai" | "anthropic">("openai");
  const [byokScope, setByokScope] = useState<"personal" | "team">("personal");
  const [byokKey, setByokKey] = useState("");
  const [error, act] = useAction();
  return (
    <section>
      <h1>Secrets</h1>
      <p>
        Your secrets reach the environments of the attempts you launch; a secret for a provider is your own key for it (bring your own key).
        Values are sealed at rest and never shown again, only masked.
      </p>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <h2>Your secrets</h2>
      {secrets.error && <p role="alert" className="error">{secrets.error.message}</p>}
      {secrets.data && secrets.data.secrets.length === 0 && <p>None yet.</p>}
      {secrets.data && secrets.data.secrets.length > 0 && (
        <table>
          <Head cols={["Name", "Value", "Provider", "Updated"]} actions />
          <tbody>
            {secrets.data.secrets.map((s: Schemas["MemberSecret"]) => (
              <tr key={s.id}>
                <td>
                  <code>{s.name}</code>
                </td>
                <td>
                  <code>{s.masked_value}</code>
                </td>
                <td>{s.provider ?? "–"}</td>
                <td>{fmtTime(s.updated_at)}</td>
                <td>
                  <DeleteButton label={`Delete ${s.name}`} onDelete={() => act(() => ok(api.DELETE("/v2/member-secrets/{secret_id}", { params: { path: { secret_id: s.id } } })), secrets.reload)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form
        className="grid"
        onSubmit={(e) => {
          e.preventDefault();
          void act(
            () => ok(api.POST("/v2/member-secrets", { body: { name, value, ...(provider ? { provider } : {}) } })),
            () => {
              setName("");
              setValue("");
              secrets.reload();
            },
          );
        }}
      >
        <label htmlFor="secret-name">Name</label>
        <input id="secret-name" value={name} onChange={(e) => setName(e.target.value)} required pattern="[A-Za-z_][A-Za-z0-9_]*" placeholder="GITHUB_TOKEN" />
        <label htmlFor="secret-value">Value</label>
        <input id="secret-value" type="password" autoComplete="off" value={value} onChange={(e) => setValue(e.target.value)} required />
        <label htmlFor="secret-provider">Provider key for</label>
        <select id="secret-provider" value={provider} onChange={(e) => setProvider(e.target.value as "" | "openai" | "anthropic")}>
          <option value="">(not a provider key)</option>
          <option value="openai">openai</option>
          <option value="anthropic">anthropic</option>
        </select>
        <button type="submit">Save the secret</button>
      </form>
      <h2>Provider keys (BYOK)</h2>
      {byok.error && <p role="alert" className="error">{byok.error.message}</p>}
      {byok.data && byok.data.length === 0 && <p>None: the team's models use the platform's provider keys.</p>}
      {byok.data && byok.data.length > 0 && (
        <table>
          <Head cols={["Name", "Provider", "Scope", "Key", "Last used"]} actions />
          <tbody>
            {byok.data.map((b) => (
              <tr key={b.id}>
                <td>{b.name}</td>
                <td>{b.provider}</td>
                <td>{b.scope}</td>
                <td>
                  <code>{b.masked_value}</code>
                </td>
                <td>{fmtTime(b.last_used_at)}</td>
                <td>
                  <DeleteButton
                    label={`Delete the ${b.scope} ${b.provider} key`}
                    onDelete={() => act(() => ok(api.DELETE("/v2/byok-credentials/{credential_id}", { params: { path: { credential_id: b.id } } })), byok.reload)}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form
        className="grid"
        aria-label="Set a provider key"
        onSubmit={(e) => {
          e.preventDefault();
          void act(
            () => ok(api.POST("/v2/byok-credentials", { body: { provider: byokProvider, scope: byokScope, api_key: byokKey } })),
            () => {
              setByokKey("");
              byok.reload();
            },
          );
        }}
      >
        <label htmlFor="byok-provider">Provider</label>
        <select id="byok-provider" value={byokProvider} onChange={(e) => setByokProvider(e.target.value as "openai" | "anthropic")}>
          <option value="openai">openai</option>
          <option value="anthropic">anthropic</option>
        </select>
        <label htmlFor="byok-scope">Scope</label>
        <select id="byok-scope" value={byokScope} onChange={(e) => setByokScope(e.target.value as "personal" | "team")}>
          <option value="personal">personal (yours)</option>
          <option value="team">team (owners)</option>
        </select>
        <label htmlFor="byok-key">API key</label>
        <input id="byok-key" type="password" autoComplete="off" value={byokKey} onChange={(e) => setByokKey(e.target.value)} required />
        <button type="submit">Save the provider key</button>
      </form>
    </section>
  );
}

export function Usage({ onUnauthorized }: { onUnauthorized: () => void }) {
  const [days, setDays] = useState(14);
  const { data, error } = usePoll(
    async () => {
      const start = new Date(Date.now() - days * 86400_000).toISOString();
      const [inference, env, limits] = await Promise.all([
        ok(api.GET("/v2/usage/inference", { params: { query: { start, bucket_width: "1d" } } })),
        ok(api.GET("/v2/environments/usage", { params: { query: { days, limit: 1 } } })),
        ok(api.GET("/v2/limits")),
      ]);
      return { inference, env, limits: limits.limits };
    },
    [days],
    { onUnauthorized },
  );
  const byDay = new Map<string, { inference: number; environments: number }>();
  if (data) {
    for (const b of data.inference.buckets) {
      const d = b.start.slice(0, 10);
      const row = byDay.get(d) ?? { inference: 0, environments: 0 };
      row.inference += b.groups.reduce((s, g) => s + g.cost, 0);
      byDay.set(d, row);
    }
    for (const c of data.env.chart) {
      const d = c.date.slice(0, 10);
      const row = byDay.get(d) ?? { inference: 0, environments: 0 };
      row.environments += c.cost;
      byDay.set(d, row);
    }
  }
  const rows = [...byDay.entries()].sort(([a], [b]) => a.localeCompare(b));
  const max = Math.max(1e-9, ...rows.map(([, r]) => r.inference + r.environments));
  return (
    <section>
      <h1>Limits and usage</h1>
      <p>
        <label htmlFor="usage-days">Days </label>
        <select id="usage-days" value={days} onChange={(e) => setDays(Number(e.target.value))}>
          {[7, 14, 30, 90].map((d) => (
            <option key={d} value={d}>
              {d}
            </option>
          ))}
        </select>
      </p>
      {error && <p role="alert" className="error">{error.message}</p>}
      {data && (
        <>
          <dl className="counts">
            <div>
              <dt>Inference</dt>
              <dd>{fmtUSD(data.inference.total_cost)}</dd>
            </div>
            <div>
              <dt>Model calls</dt>
              <dd>{data.inference.total_requests}</dd>
            </div>
            <div>
              <dt>Environments</dt>
              <dd>{fmtUSD(data.env.summary.total_cost)}</dd>
            </div>
            <div>
              <dt>Sandboxes</dt>
              <dd>{data.env.summary.total_count}</dd>
            </div>
          </dl>
          <h2>Spend by day</h2>
          {rows.length === 0 ? (
            <p>Nothing spent in these days.</p>
          ) : (
            <svg viewBox={`0 0 ${rows.length * 40} 140`} width={Math.min(1100, rows.length * 40)} height={140} role="img" aria-label={`Spend per day over ${rows.length} days`}>
              {rows.map(([d, r], i) => {
                const hi = ((r.inference + r.environments) / max) * 110;
                const he = (r.environments / max) * 110;
                return (
                  <g key={d}>
                    <rect x={i * 40 + 6} y={120 - hi} width={28} height={hi - he} className="bar">
                      <title>{`${d}: inference ${fmtUSD(r.inference)}`}</title>
                    </rect>
                    <rect x={i * 40 + 6} y={120 - he} width={28} height={he} className="bar2">
                      <title>{`${d}: environments ${fmtUSD(r.environments)}`}</title>
                    </rect>
                    <text x={i * 40 + 20} y={134} textAnchor="middle" className="axis">
                      {d.slice(5)}
                    </text>
                  </g>
                );
              })}
            </svg>
          )}
          <p className="muted">Per UTC day: inference (accent color, on top) and environment time (green, below); hover a bar for its amount.</p>
          <h2>Limits</h2>
          {data.limits.length === 0 ? (
            <p>No spending limits. Set them with the API (POST /v2/limits).</p>
          ) : (
            <table>
              <Head cols={["For", "Per", "Amount", "Spent", "Action"]} />
              <tbody>
                {data.limits.map((l) => (
                  <tr key={l.id}>
                    <td>{l.api_key_name || l.member_name || "the team"}</td>
                    <td>{l.interval}</td>
                    <td>${l.amount_usd}</td>
                    <td>${l.spend_usd}</td>
                    <td>{l.action}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
