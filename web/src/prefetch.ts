// The charts index.html asked for before the app's code loaded (see the script there).

interface ChartsPrefetch {
  name: string;
  at: number;
  res: Promise<Response | null>;
}

declare global {
  interface Window {
    __lcChartsPrefetch?: ChartsPrefetch;
  }
}

/** A prefetch older than this is not used: the app asks anew. */
export const PREFETCH_MAX_AGE_MS = 10_000;

/**
 * Takes the prefetched charts answer of store `name` (source all), once: a later call, another
 * store, an old prefetch or a failed one gives undefined and the caller asks as usual (an error
 * answer, such as a 401, is never used: the usual request handles it).
 */
export async function takeChartsPrefetch(name: string): Promise<unknown> {
  const p = typeof window === 'undefined' ? undefined : window.__lcChartsPrefetch;
  if (!p) return undefined;
  delete window.__lcChartsPrefetch;
  if (p.name !== name || Date.now() - p.at > PREFETCH_MAX_AGE_MS) return undefined;
  try {
    const res = await p.res;
    if (!res || !res.ok || res.status !== 200) return undefined;
    return (await res.json()) as unknown;
  } catch {
    return undefined;
  }
}
