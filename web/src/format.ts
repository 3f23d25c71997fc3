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
