// The run comparison: one metric of several stores on one chart, from each store's charts answer
// (GET /api/v1/experiments/{name}/charts). Pure functions (tested in compare.test.ts).
import type { Charts } from './api';

export type CompareMetric = 'reward_by_version' | 'reward_over_time' | 'length_over_time';

export const COMPARE_METRICS: { id: CompareMetric; label: string; x: 'category' | 'time'; unit: string }[] = [
  { id: 'reward_by_version', label: 'Mean reward by policy_version', x: 'category', unit: 'reward' },
  { id: 'reward_over_time', label: 'Mean reward over time', x: 'time', unit: 'reward' },
  { id: 'length_over_time', label: 'Mean response length over time', x: 'time', unit: 'tokens' },
];

/** At most this many stores on one chart (more lines would be unreadable). */
export const MAX_COMPARE = 4;

/** Compares strings with their runs of digits as numbers: step-2 before step-10, v1.9 before v1.10. */
export function naturalCompare(a: string, b: string): number {
  const ra = a.match(/\d+|\D+/g) ?? [];
  const rb = b.match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.min(ra.length, rb.length); i++) {
    const x = ra[i];
    const y = rb[i];
    if (x === y) continue;
    const dx = /^\d/.test(x);
    const dy = /^\d/.test(y);
    if (dx && dy) {
      const nx = BigInt(x);
      const ny = BigInt(y);
      if (nx !== ny) return nx < ny ? -1 : 1;
      if (x.length !== y.length) return x.length - y.length; // "01" after "1"
      continue;
    }
    return x < y ? -1 : 1;
  }
  return ra.length - rb.length;
}

export interface ComparePoint {
  x: string;
  /** One value per store, in the order of the stores (null where that store has no point). */
  values: (number | null)[];
}

function points(c: Charts | undefined, metric: CompareMetric): { x: string; y: number | null }[] {
  if (!c) return [];
  switch (metric) {
    case 'reward_by_version':
      return (c.reward_by_policy_version ?? []).map((p) => ({ x: String(p.policy_version ?? '∅'), y: p.mean }));
    case 'reward_over_time':
      return (c.reward_over_time ?? []).map((p) => ({ x: String(p.t), y: p.mean }));
    case 'length_over_time':
      return (c.length_over_time ?? []).map((p) => ({ x: String(p.t), y: p.mean }));
  }
}

function timeKey(x: string): number {
  const n = Number(x);
  if (Number.isFinite(n)) return n < 1e12 ? n * 1000 : n;
  const t = Date.parse(x);
  return Number.isFinite(t) ? t : Number.POSITIVE_INFINITY;
}

/** The stores' series of one metric on a shared x: policy versions merged in natural order, times in
 * time order. A store without a point at an x has null there (its line skips it). */
export function mergeSeries(charts: (Charts | undefined)[], metric: CompareMetric): ComparePoint[] {
  const byX = new Map<string, (number | null)[]>();
  charts.forEach((c, i) => {
    for (const p of points(c, metric)) {
      let row = byX.get(p.x);
      if (!row) {
        row = charts.map(() => null);
        byX.set(p.x, row);
      }
      row[i] = typeof p.y === 'number' && Number.isFinite(p.y) ? p.y : null;
    }
  });
  const xs = [...byX.keys()];
  const kind = COMPARE_METRICS.find((m) => m.id === metric)?.x ?? 'category';
  xs.sort(kind === 'time' ? (a, b) => timeKey(a) - timeKey(b) : naturalCompare);
  return xs.map((x) => ({ x, values: byX.get(x)! }));
}

/** The stores named in ?stores=a,b,c: distinct, at most MAX_COMPARE. */
export function parseStores(v: string | null): string[] {
  return [...new Set((v ?? '').split(',').map((s) => s.trim()).filter(Boolean))].slice(0, MAX_COMPARE);
}
