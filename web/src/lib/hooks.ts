import { useCallback, useEffect, useRef, useState } from "react";

import { messageOf } from "../api/client";

/**
 * Runs `tick` now and then every `intervalMs` while `active`, never two at once: the next
 * tick is planned when the previous one has finished, so a slow server is not piled on.
 * `tick` gets a signal that aborts when the component goes away.
 */
export function usePolling(tick: (signal: AbortSignal) => Promise<void>, intervalMs: number, active: boolean): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!active) return undefined;
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        await latest.current(controller.signal);
      } catch {
        // The tick shows its own errors; polling goes on.
      }
      if (!controller.signal.aborted) timer = setTimeout(run, intervalMs);
    };
    void run();
    return () => {
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
    };
  }, [intervalMs, active]);
}

export interface Loaded<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => Promise<void>;
}

/** Loads `load()` when `key` changes; `reload` loads again (after a change the page made). */
export function useLoad<T>(load: (signal?: AbortSignal) => Promise<T>, key: string): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const latest = useRef(load);
  latest.current = load;

  const reload = useCallback(async () => {
    try {
      setData(await latest.current());
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setLoading(false);
    }
  }, []);

  useEffect(() => {
    const controller = new AbortController();
    setLoading(true);
    latest
      .current(controller.signal)
      .then((value) => {
        if (!controller.signal.aborted) {
          setData(value);
          setError(null);
        }
      })
      .catch((e) => {
        if (!controller.signal.aborted) setError(messageOf(e));
      })
      .finally(() => {
        if (!controller.signal.aborted) setLoading(false);
      });
    return () => controller.abort();
  }, [key]);

  return { data, error, loading, reload };
}
