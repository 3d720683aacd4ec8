import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { Charts, Experiment, Task } from './api';
import { jsonResponse, stubFetch } from './test/fetchStub';

const EXP: Experiment = {
  name: 'demo',
  rows: 12345,
  fragments: 4,
  pending_generations: 300,
  shards: [
    { shard_id: 'shard-a', pending_generations: 299, epoch: 3, watermark: 17 },
    { shard_id: 'shard-b', pending_generations: 1, epoch: 1, watermark: 2 },
  ],
  unflushed_rows: 12,
  version: 9,
  last_updated: new Date().toISOString(),
  last_compaction: null,
  needs_compaction: true,
  stale: false,
};

const EMPTY_CHARTS: Charts = {
  reward_by_policy_version: [],
  reward_over_time: [],
  length_hist: [],
  length_over_time: [],
  ingest_rate: [],
  pending: { wal_rows: 0, generations: 0 },
};
const CHARTS = { 'GET /api/v1/experiments/demo/charts': () => EMPTY_CHARTS };

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

describe('experiment overview', () => {
  it('shows the statistics and the per-shard table', async () => {
    const f = stubFetch({ ...CHARTS, 'GET /api/v1/experiments/demo': () => EXP });
    renderAt('/experiments/demo');
    const stats = await screen.findByTestId('experiment-stats');
    expect(stats.textContent).toContain('12,345');
    expect(stats.textContent).toContain('needs compaction');
    expect(f.last('/api/v1/experiments/demo')!.url.searchParams.get('fresh')).toBe('true');
    const shards = screen.getByTestId('shards-table');
    expect(within(shards).getByText('shard-a')).toBeTruthy();
    expect(shards.textContent).toContain('backlog'); // 299 >= 256
    expect(screen.getByTestId('tab-overview').getAttribute('aria-selected')).toBe('true');
  });

  it('Merge posts, shows the task and follows it to done', async () => {
    let polls = 0;
    const task: Task = { id: 't-1', kind: 'merge', store: 'demo', state: 'queued', attempts: 0 };
    const f = stubFetch({
      ...CHARTS,
      'GET /api/v1/experiments/demo': () => EXP,
      'POST /api/v1/experiments/demo/merge': () => jsonResponse({ task }, 202),
      'GET /api/v1/tasks/t-1': () => ({ ...task, state: ++polls > 1 ? 'done' : 'running' }),
    });
    renderAt('/experiments/demo');
    await screen.findByTestId('experiment-stats');
    fireEvent.click(screen.getByTestId('merge-button'));
    const t = await screen.findByTestId('action-task');
    expect(t.textContent).toContain('t-1');
    expect(t.textContent).toContain('queued');
    expect(f.to('/api/v1/experiments/demo/merge', 'POST')).toHaveLength(1);
    await waitFor(() => expect(screen.getByTestId('action-task').textContent).toContain('done'), { timeout: 5000 });
    // The statistics were re-read after the task finished.
    await waitFor(() => expect(f.to('/api/v1/experiments/demo').length).toBeGreaterThanOrEqual(2));
  });

  it('Compact shows the API error message', async () => {
    stubFetch({
      ...CHARTS,
      'GET /api/v1/experiments/demo': () => EXP,
      'POST /api/v1/experiments/demo/compact': () =>
        jsonResponse({ error: { code: 'conflict', message: 'a compaction is already running' } }, 409),
    });
    renderAt('/experiments/demo');
    await screen.findByTestId('experiment-stats');
    fireEvent.click(screen.getByTestId('compact-button'));
    expect((await screen.findByRole('alert')).textContent).toContain('a compaction is already running');
  });

  it('shows not-found errors for an unknown store', async () => {
    stubFetch({
      'GET /api/v1/experiments/nope': () =>
        jsonResponse({ error: { code: 'not_found', message: 'store "nope" not found' } }, 404),
    });
    renderAt('/experiments/nope');
    expect((await screen.findByRole('alert')).textContent).toContain('store "nope" not found');
    // Nothing to merge or compact in a store that does not exist.
    expect(screen.getByTestId('store-missing').textContent).toContain('nope');
    expect(screen.queryByTestId('merge-button')).toBeNull();
    expect(screen.queryByTestId('compact-button')).toBeNull();
    expect(screen.queryByTestId('charts')).toBeNull();
  });
});
