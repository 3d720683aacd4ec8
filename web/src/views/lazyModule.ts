import { useEffect, useState } from 'react';

// The drawing code (visx and d3) is a chunk of its own, loaded once per page while the charts are
// being computed, by the overview's charts and the comparison alike. Not React.lazy under
// Suspense: React holds revealed Suspense content back by up to 300 ms (its fallback throttle),
// which was most of the time from answer to drawn charts.

/** A chunk loaded at most once (again after a failed load), and what it loaded so far. */
export interface LazyModule<M> {
  load: () => Promise<M>;
  loaded: () => M | undefined;
}

/** lazyModule(() => import('./X')): keep the import() literal at the caller, so that it is its own chunk. */
export function lazyModule<M>(importer: () => Promise<M>): LazyModule<M> {
  let mod: M | undefined;
  let loading: Promise<M> | undefined;
  return {
    loaded: () => mod,
    load: () =>
      (loading ??= importer().then(
        (m) => (mod = m),
        (e: unknown) => {
          loading = undefined; // a failed chunk load may be retried on the next mount
          throw e;
        },
      )),
  };
}

/** The chunk's module once loaded (at once if it already was), or the error of its load. */
export function useLazyModule<M>(chunk: LazyModule<M>): { module: M | undefined; error: unknown } {
  const [module, setModule] = useState<M | undefined>(chunk.loaded);
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    if (module) return;
    let cancelled = false;
    // Fetch the drawing code alongside the data.
    chunk.load().then(
      (m) => !cancelled && setModule(() => m),
      (e: unknown) => !cancelled && setError(e),
    );
    return () => {
      cancelled = true;
    };
  }, [chunk, module]);
  return { module, error };
}
