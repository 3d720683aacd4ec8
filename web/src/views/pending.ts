import type { Experiment } from '../api';

/** Pending generations per shard above which the store warns. */
export const PENDING_WARN = 256;
/** Pending generations per shard at which reads are refused. */
export const PENDING_LIMIT = 4096;

/** Rows waiting in sealed, un-merged WAL generations, summed over the shards (undefined: unknown). */
export function pendingRows(exp: Experiment | undefined): number | undefined {
  if (!exp) return undefined;
  const shards = exp.shards ?? [];
  if (shards.length === 0) return exp.pending_generations === 0 ? 0 : undefined;
  if (!shards.some((s) => typeof s.pending_rows === 'number')) return undefined;
  return shards.reduce((n, s) => n + (s.pending_rows ?? 0), 0);
}
