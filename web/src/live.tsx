// Live refresh: views re-fetch every few seconds while the page is visible and the toggle is on.
import {
  createContext,
  useCallback,
  useContext,
  useEffect,
  useRef,
  useState,
  type ReactNode,
} from 'react';

export const REFRESH_MS = 5000;
const STORAGE_KEY = 'lc.live';

interface LiveState {
  enabled: boolean;
  setEnabled: (v: boolean) => void;
  intervalMs: number;
}

const LiveContext = createContext<LiveState>({ enabled: false, setEnabled: () => {}, intervalMs: REFRESH_MS });

function initialEnabled(): boolean {
  try {
    return window.localStorage.getItem(STORAGE_KEY) !== 'off';
  } catch {
    return true;
  }
}

export function LiveProvider({
  children,
  intervalMs = REFRESH_MS,
  enabled: forced,
}: {
  children: ReactNode;
  intervalMs?: number;
  enabled?: boolean;
}) {
  const [enabled, setState] = useState<boolean>(() => forced ?? initialEnabled());
  const setEnabled = useCallback((v: boolean) => {
    setState(v);
    try {
      window.localStorage.setItem(STORAGE_KEY, v ? 'on' : 'off');
    } catch {
      // storage unavailable: keep the choice for this page only
    }
  }, []);
  return <LiveContext.Provider value={{ enabled, setEnabled, intervalMs }}>{children}</LiveContext.Provider>;
}

export function useLive(): LiveState {
  return useContext(LiveContext);
}

function pageVisible(): boolean {
  return typeof document === 'undefined' || document.visibilityState !== 'hidden';
}

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  /** True while the first answer for the current key is awaited (not during background refreshes). */
  loading: boolean;
  /** When the current data was received. */
  updatedAt: number | undefined;
  reload: () => void;
}

/**
 * Fetches with `fn` whenever `key` changes and then every refresh interval while live refresh is
 * on and the page is visible. A background refresh keeps the shown data (no flashing) and never
 * touches the caller's state such as page or filters; answers to superseded requests are dropped.
 * `minIntervalMs` stretches the refresh period for this read.
 */
export function usePoll<T>(key: string, fn: (signal: AbortSignal) => Promise<T>, minIntervalMs = 0): Polled<T> {
  const live = useLive();
  const { enabled } = live;
  // Expensive reads (the charts scan the whole store) may ask to be refreshed less often.
  const intervalMs = Math.max(live.intervalMs, minIntervalMs);
  const [state, setState] = useState<{ key: string; data?: T; error?: unknown; updatedAt?: number }>({ key });
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const seq = useRef(0);
  const inflight = useRef<AbortController | null>(null);
  const keyRef = useRef(key);
  keyRef.current = key;

  const run = useCallback((background: boolean) => {
    if (background && inflight.current) return; // a request is already under way
    inflight.current?.abort();
    const ctl = new AbortController();
    inflight.current = ctl;
    const my = ++seq.current;
    const k = keyRef.current;
    fnRef.current(ctl.signal).then(
      (data) => {
        if (my !== seq.current) return;
        inflight.current = null;
        setState({ key: k, data, error: undefined, updatedAt: Date.now() });
      },
      (error: unknown) => {
        if (my !== seq.current) return;
        inflight.current = null;
        if (error instanceof DOMException && error.name === 'AbortError') return;
        setState((s) => (s.key === k ? { ...s, error } : { key: k, error }));
      },
    );
  }, []);

  // Fetch on mount and whenever the key changes.
  useEffect(() => {
    run(false);
  }, [key, run]);

  useEffect(
    () => () => {
      seq.current++;
      inflight.current?.abort();
      inflight.current = null;
    },
    [],
  );

  // Background refresh.
  useEffect(() => {
    if (!enabled) return;
    const timer = window.setInterval(() => {
      if (pageVisible()) run(true);
    }, intervalMs);
    const onVisible = () => {
      if (pageVisible()) run(true);
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      window.clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [enabled, intervalMs, run]);

  const current = state.key === key;
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : undefined,
    loading: !current || (state.data === undefined && state.error === undefined),
    updatedAt: current ? state.updatedAt : undefined,
    reload: useCallback(() => run(false), [run]),
  };
}

/** Returns `value` once it has stopped changing for `ms` milliseconds. */
export function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = window.setTimeout(() => setV(value), ms);
    return () => window.clearTimeout(t);
  }, [value, ms]);
  return v;
}
