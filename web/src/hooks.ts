import { useCallback, useEffect, useRef, useState } from "react";
import { Unauthorized } from "./api/client";

/** Loaded is what a page shows: data, an error, or neither yet. */
export type Loaded<T> = { data?: T; error?: Error };

/**
 * usePoll loads with load, then again every intervalMs while live(data) holds (the spec's feeds
 * are polled, not pushed). A 401 calls onUnauthorized.
 */
export function usePoll<T>(
  load: () => Promise<T>,
  deps: unknown[],
  opts: { intervalMs?: number; live?: (d: T) => boolean; onUnauthorized: () => void },
): Loaded<T> & { reload: () => void } {
  const [state, setState] = useState<Loaded<T>>({});
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const optsRef = useRef(opts);
  optsRef.current = opts;
  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    const run = async () => {
      try {
        const data = await loadRef.current();
        if (stopped) return;
        setState({ data });
        const o = optsRef.current;
        if (o.intervalMs && o.live?.(data)) timer = window.setTimeout(run, o.intervalMs);
      } catch (e) {
        if (stopped) return;
        if (e instanceof Unauthorized) optsRef.current.onUnauthorized();
        else setState((s) => ({ data: s.data, error: e as Error }));
      }
    };
    void run();
    return () => {
      stopped = true;
      if (timer) window.clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/**
 * useAction runs what a button asks of the API: it clears the last error, runs fn, then after
 * (default: onDone), and keeps a failed action's message for the page to show.
 */
export function useAction(onDone?: () => void): [string, (fn: () => Promise<unknown>, after?: () => void) => Promise<void>] {
  const [error, setError] = useState("");
  const doneRef = useRef(onDone);
  doneRef.current = onDone;
  const act = useCallback(async (fn: () => Promise<unknown>, after?: () => void) => {
    setError("");
    try {
      await fn();
      (after ?? doneRef.current)?.();
    } catch (e) {
      setError((e as Error).message);
    }
  }, []);
  return [error, act];
}
