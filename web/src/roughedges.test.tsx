import { render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { Experiment } from './api';
import { stubFetch, type Call } from './test/fetchStub';

const RECORDS = '/api/v1/experiments/demo/records';

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

function exp(over: Partial<Experiment>): Experiment {
  return { name: 'demo', rows: 0, fragments: 0, pending_generations: 0, shards: [], ...over };
}

describe('empty Fragments tab', () => {
  it('says how many rows wait in the WAL, from the statistics', async () => {
    const f = stubFetch({
      [`GET ${RECORDS}`]: (c: Call) => ({ records: [], has_more: false, limit: 25, offset: 0, source: c.url.searchParams.get('source') }),
      'GET /api/v1/experiments/demo': () =>
        exp({
          rows: 7,
          pending_generations: 3,
          shards: [
            { shard_id: 'a', pending_generations: 2, pending_rows: 5, epoch: 1, watermark: 0 },
            { shard_id: 'b', pending_generations: 1, pending_rows: 2, epoch: 1, watermark: 0 },
          ],
        }),
    });
    renderAt('/experiments/demo/records');
    const hint = await screen.findByTestId('fragments-wal-hint');
    expect(hint.textContent).toContain('7 rows wait in the WAL');
    expect(hint.textContent).toContain('3 pending generations');
    expect(within(hint).getByRole('link', { name: 'Show the WAL' }).getAttribute('href')).toBe('/experiments/demo/records?source=wal');
    expect(f.to('/api/v1/experiments/demo')).toHaveLength(1);
  });

  it('says the store is empty when nothing waits either', async () => {
    stubFetch({
      [`GET ${RECORDS}`]: () => ({ records: [], has_more: false, limit: 25, offset: 0, source: 'fragments' }),
      'GET /api/v1/experiments/demo': () => exp({ shards: [{ shard_id: 'a', pending_generations: 0, pending_rows: 0, epoch: 1, watermark: 1 }] }),
    });
    renderAt('/experiments/demo/records');
    await waitFor(() => expect(screen.getByTestId('records-empty').textContent).toBe('No records in this store yet.'));
    expect(screen.queryByTestId('fragments-wal-hint')).toBeNull();
  });
});

describe('All source', () => {
  it('keeps the order the API lists the rows in, never re-sorting them, and says so', async () => {
    const order = ['w-9', 'w-1', 'b-0', 'b-5', 'a-2'];
    stubFetch({
      [`GET ${RECORDS}`]: () => ({ records: order.map((id) => ({ id, rollout_id: 'r' })), has_more: false, limit: 25, offset: 0, source: 'all' }),
    });
    renderAt('/experiments/demo/records?source=all');
    const table = await screen.findByTestId('records-table');
    await waitFor(() => expect(table.getAttribute('data-source')).toBe('all'));
    expect(within(table).getAllByTestId('record-row').map((r) => r.getAttribute('data-record-id'))).toEqual(order);
    expect(screen.getByText(/newest write winning; shown in the order the API lists them/)).toBeTruthy();
  });
});

describe('Status column', () => {
  it('shows what needs attention, or ok', async () => {
    const list = [
      exp({ name: 'clean' }),
      exp({ name: 'pending', pending_generations: 2 }),
      exp({ name: 'backlog', pending_generations: 300, shards: [{ shard_id: 'a', pending_generations: 300, epoch: 1, watermark: 0 }] }),
      exp({ name: 'broken', stale: true, error: 'storage unreachable' }),
      exp({ name: 'fragmented', needs_compaction: true }),
      // 400 pending over four shards: no shard near the per-shard limit.
      exp({
        name: 'spread',
        pending_generations: 400,
        shards: ['a', 'b', 'c', 'd'].map((id) => ({ shard_id: id, pending_generations: 100, epoch: 1, watermark: 0 })),
      }),
    ];
    stubFetch({ 'GET /api/v1/experiments': () => ({ experiments: list, total: list.length }) });
    renderAt('/');
    const rows = await screen.findAllByTestId('experiment-row');
    const status = rows.map((r) => within(r).getByTestId('experiment-status').textContent);
    expect(status).toEqual(['ok', 'merge pending', 'merge backlog', 'error', 'needs compaction', 'merge pending']);
    expect(within(rows[3]).getByText('error').getAttribute('title')).toBe('storage unreachable');
  });
});
