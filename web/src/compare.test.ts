import { describe, expect, it } from 'vitest';
import type { Charts } from './api';
import { mergeSeries, naturalCompare, parseStores } from './compare';

function charts(byVersion: [string, number | null][], overTime: [string, number][] = []): Charts {
  return {
    reward_by_policy_version: byVersion.map(([v, mean]) => ({ policy_version: v, mean, p10: null, p90: null, count: 1 })),
    reward_over_time: overTime.map(([t, mean]) => ({ t, mean, p10: null, p90: null, count: 1 })),
    length_hist: [],
    length_over_time: [],
    ingest_rate: [],
    pending: { wal_rows: 0, generations: 0 },
  };
}

describe('run comparison', () => {
  it('orders versions naturally', () => {
    const vs = ['step-10', 'step-2', 'step-1', 'v1.10', 'v1.9', 'a'];
    expect([...vs].sort(naturalCompare)).toEqual(['a', 'step-1', 'step-2', 'step-10', 'v1.9', 'v1.10']);
    expect(naturalCompare('99999999999999999999', '100000000000000000000')).toBeLessThan(0);
  });

  it('merges stores on the union of versions, null where a store has none', () => {
    const a = charts([['step-1', 0.1], ['step-2', 0.2], ['step-10', 0.5]]);
    const b = charts([['step-2', 0.3], ['step-3', null]]);
    expect(mergeSeries([a, b], 'reward_by_version')).toEqual([
      { x: 'step-1', values: [0.1, null] },
      { x: 'step-2', values: [0.2, 0.3] },
      { x: 'step-3', values: [null, null] },
      { x: 'step-10', values: [0.5, null] },
    ]);
  });

  it('merges times in time order and skips a store that failed', () => {
    const a = charts([], [['2024-01-01T02:00:00Z', 2], ['2024-01-01T00:00:00Z', 1]]);
    expect(mergeSeries([a, undefined], 'reward_over_time')).toEqual([
      { x: '2024-01-01T00:00:00Z', values: [1, null] },
      { x: '2024-01-01T02:00:00Z', values: [2, null] },
    ]);
  });

  it('reads the stores from the query', () => {
    expect(parseStores('a, b,,a,c,d,e')).toEqual(['a', 'b', 'c', 'd']);
    expect(parseStores(null)).toEqual([]);
  });
});
