import { render, screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { Charts, Experiment, WorkerStorage } from './api';
import { jsonResponse, stubFetch } from './test/fetchStub';
import { fmtMs, fmtSeals } from './views/Storage';

const EXP: Experiment = {
  name: 'demo',
  rows: 10,
  fragments: 1,
  pending_generations: 3,
  shards: [{ shard_id: 'shard-a', pending_generations: 3, pending_rows: 1234, epoch: 2, watermark: 5 }],
  unflushed_rows: 0,
  version: 4,
};

const EMPTY_CHARTS: Charts = {
  reward_by_policy_version: [],
  reward_over_time: [],
  length_hist: [],
  length_over_time: [],
  ingest_rate: [],
  pending: { wal_rows: 0, generations: 0 },
};

const W1: WorkerStorage = {
  instance_id: 'w-1',
  shard_id: 'shard-a',
  endpoint: 'http://w1:3000',
  wal_puts: 0,
  wal_put_mean_ms: 0,
  wal_syncs: 40,
  wal_sync_mean_ms: 2.345,
  seals: { flush: 10, memtable_full: 2, claim: 0 },
  seal_mean_ms: 12.5,
  fenced_writers: 1,
  failed_writers: 0,
  replay_corruptions: 0,
  pending_generations: 3,
  unsealed_rows: 7,
  entry_rows_total: 400,
};
const W2: WorkerStorage = {
  ...W1,
  instance_id: 'w-2',
  shard_id: 'shard-b',
  error: 'read metrics: connection refused',
  wal_syncs: 0,
  seals: {},
  fenced_writers: 0,
};

function renderOverview(storage: () => unknown) {
  stubFetch({
    'GET /api/v1/experiments/demo': () => EXP,
    'GET /api/v1/experiments/demo/charts': () => EMPTY_CHARTS,
    'GET /api/v1/workers/storage': storage,
  });
  window.history.replaceState(null, '', '/experiments/demo');
  return render(<App live={false} />);
}

describe('storage panel', () => {
  it('shows each worker: WAL latency, seals by cause, backlog, fenced writers, unreachable ones', async () => {
    renderOverview(() => ({ workers: [W2, W1] }));
    const table = await screen.findByTestId('storage-table');
    const rows = await within(table).findAllByTestId('storage-row');
    expect(rows).toHaveLength(2);
    const [r1, r2] = rows; // sorted by instance id
    expect(r1.textContent).toContain('w-1');
    expect(r1.textContent).toContain('this store'); // its shard wrote to demo
    expect(r1.textContent).toContain('2.3 ms'); // WAL sync mean
    expect(r1.textContent).toContain('—'); // no object puts measured
    expect(r1.textContent).toContain('12 (flush 10, memtable_full 2)');
    expect(r1.textContent).toContain('fenced');
    expect(r2.textContent).toContain('unreachable');
    expect(r2.textContent).toContain('connection refused');
    expect(r2.textContent).not.toContain('this store');
    // The shard table shows each shard's pending rows.
    expect((await screen.findByTestId('shards-table')).textContent).toContain('1,234');
  });

  it('says so when no worker reports, and an endpoint error is no alert', async () => {
    renderOverview(() => ({ workers: [] }));
    expect((await screen.findByTestId('storage-empty')).textContent).toContain('No live worker');
  });

  it('an older master without the endpoint leaves the overview usable', async () => {
    renderOverview(() => jsonResponse({ error: { code: 'not_found', message: 'no route' } }, 404));
    expect((await screen.findByTestId('storage-error')).textContent).toContain('no route');
    await screen.findByTestId('experiment-stats');
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('formats latencies and seals', () => {
    expect(fmtMs(0.25, 3)).toBe('250 µs');
    expect(fmtMs(3.21, 3)).toBe('3.2 ms');
    expect(fmtMs(1234.5, 3)).toBe('1,235 ms');
    expect(fmtMs(5, 0)).toBe('—');
    expect(fmtSeals({})).toBe('0');
    expect(fmtSeals(null)).toBe('0');
    expect(fmtSeals({ close: 1, flush: 1 })).toBe('2 (close 1, flush 1)');
  });
});
