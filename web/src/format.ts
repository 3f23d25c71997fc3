export function fmtReward(r: number | null | undefined): string {
  return r === null || r === undefined ? "–" : r.toFixed(3);
}

export function fmtUSD(v: number | null | undefined): string {
  return v === null || v === undefined ? "–" : `$${v.toFixed(4)}`;
}

export function fmtTime(s: string | null | undefined): string {
  if (!s) return "–";
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? s : d.toLocaleString();
}

export const terminalTrace = new Set(["completed", "error", "cancelled"]);
export const terminalJob = new Set(["completed", "cancelled"]);

/** fmtDuration shows the seconds between two times (or from start to now), or "–". */
export function fmtDuration(start: string | null | undefined, end: string | null | undefined): string {
  if (!start) return "–";
  const ms = (end ? Date.parse(end) : Date.now()) - Date.parse(start);
  if (Number.isNaN(ms) || ms < 0) return "–";
  return fmtMs(ms);
}

/** fmtMs shows a span of milliseconds at a scale a reader takes in at a glance. */
export function fmtMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60_000);
  return m < 60 ? `${m} min ${Math.round((ms % 60_000) / 1000)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** shortId is the first eight characters of a UUID: enough to tell a job's attempts apart. */
export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** shortDigest is an image digest cut to its algorithm and 12 hex digits (sha256:e46c65a1b2c3…):
 * enough to tell two builds apart; the full digest goes in a title. */
export function shortDigest(d: string): string {
  return d.length > 19 ? `${d.slice(0, 19)}…` : d;
}
