import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import { api, type Charts, type Experiment, type Task } from './api';
import { fmtDuration } from './format';
import { jsonResponse, stubFetch, type Handler } from './test/fetchStub';
import { LAG_WARN_SECONDS, shardLags, taskResultSummary } from './views/lifecycle';

const EMPTY_CHARTS: Charts = {
  reward_by_policy_version: [],
  reward_over_time: [],
  length_hist: [],
  length_over_time: [],
  ingest_rate: [],
  pending: { wal_rows: 0, generations: 0 },
};

function exp(name: string, lag: number | undefined): Experiment {
  return {
    name,
    rows: 10,
    fragments: 1,
    pending_generations: lag ? 1 : 0,
    shards: [],
    unflushed_rows: 0,
    version: 3,
    last_updated: new Date().toISOString(),
    last_compaction: null,
    needs_compaction: false,
    merge_lag_seconds: lag,
    stale: false,
  };
}

// Two shards: a's oldest generation was sealed 30 s before b's. The browser's clock is far off on
// purpose (the oldest_pending_at values are in 2001): the lags come from the server's figure.
const OVERVIEW: Experiment = {
  ...exp('demo', 95.5),
  pending_generations: 3,
  shards: [
    { shard_id: 'shard-a', pending_generations: 2, pending_rows: 20, epoch: 1, watermark: 4, oldest_pending_at: '2001-01-01T00:00:00Z' },
    { shard_id: 'shard-b', pending_generations: 1, pending_rows: 5, epoch: 1, watermark: 9, oldest_pending_at: '2001-01-01T00:00:30Z' },
    { shard_id: 'shard-c', pending_generations: 0, pending_rows: 0, epoch: 2, watermark: 7 },
  ],
};

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

function overviewRoutes(extra: Record<string, Handler> = {}): Record<string, Handler> {
  return {
    'GET /api/v1/experiments/demo': () => OVERVIEW,
    'GET /api/v1/experiments/demo/charts': () => EMPTY_CHARTS,
    'GET /api/v1/workers/storage': () => ({ workers: [] }),
    'GET /api/v1/rollouts/demo/tags': () => ({ tags: [] }),
    ...extra,
  };
}

describe('fmtDuration', () => {
  it('formats a lag in human units and a dash for none', () => {
    expect(fmtDuration(0)).toBe('—');
    expect(fmtDuration(undefined)).toBe('—');
    expect(fmtDuration(null)).toBe('—');
    expect(fmtDuration(-3)).toBe('—');
    expect(fmtDuration(Number.NaN)).toBe('—');
    expect(fmtDuration(0.4)).toBe('<1s');
    expect(fmtDuration(42.9)).toBe('42s');
    expect(fmtDuration(60)).toBe('1m 0s');
    expect(fmtDuration(185)).toBe('3m 5s');
    expect(fmtDuration(2 * 3600 + 10 * 60 + 59)).toBe('2h 10m');
    expect(fmtDuration(4 * 86400 + 3 * 3600 + 1)).toBe('4d 3h');
  });
});

describe('merge lag', () => {
  it('experiments list: a Base lag column, "—" for none, highlighted above 60 s', async () => {
    stubFetch({
      'GET /api/v1/experiments': () => ({
        experiments: [exp('fresh', 0), exp('slow', 90), exp('recent', 12.3), exp('old-server', undefined), exp('edge', LAG_WARN_SECONDS)],
        total: 5,
      }),
    });
    renderAt('/');
    const table = await screen.findByTestId('experiments-table');
    await waitFor(() => expect(within(table).getAllByTestId('experiment-row')).toHaveLength(5));
    const headers = [...table.querySelectorAll('th')].map((th) => th.textContent);
    expect(headers).toContain('Base lag');
    const lagOf = (i: number) => within(table).getAllByTestId('experiment-row')[i].querySelector('[data-testid="merge-lag"]')!;
    expect(lagOf(0).textContent).toBe('—');
    expect(lagOf(0).getAttribute('data-warn')).toBe('false');
    expect(lagOf(1).textContent).toBe('1m 30s');
    expect(lagOf(1).getAttribute('data-warn')).toBe('true');
    expect(lagOf(1).className).toContain('lag-warn');
    expect(lagOf(2).textContent).toBe('12s');
    expect(lagOf(2).getAttribute('data-warn')).toBe('false');
    expect(lagOf(3).textContent).toBe('—'); // a server without the field
    expect(lagOf(4).getAttribute('data-warn')).toBe('false'); // at the limit, not above it
  });

  it('overview: the store lag as a statistic and each shard lag, from the server clock', async () => {
    stubFetch(overviewRoutes());
    renderAt('/experiments/demo');
    const stats = await screen.findByTestId('experiment-stats');
    const lag = within(stats).getByTestId('merge-lag');
    expect(lag.closest('.stat')!.textContent).toContain('Base lag');
    expect(lag.textContent).toBe('1m 35s');
    expect(lag.getAttribute('data-warn')).toBe('true');
    const rows = screen.getByTestId('shards-table').querySelectorAll('tbody tr');
    const shardLag = (i: number) => rows[i].querySelector('[data-testid="merge-lag"]')!;
    expect(shardLag(0).textContent).toBe('1m 35s'); // the oldest shard: the store lag
    expect(shardLag(1).textContent).toBe('1m 5s'); // sealed 30 s later
    expect(shardLag(2).textContent).toBe('—'); // nothing pending
  });

  it('regression: a lag of a few milliseconds keeps its figure (it read 0.0 and so none)', async () => {
    stubFetch({ 'GET /api/v1/experiments': () => ({ experiments: [exp('just-sealed', 0.004)], total: 1 }) });
    renderAt('/');
    const table = await screen.findByTestId('experiments-table');
    await waitFor(() => expect(within(table).getAllByTestId('experiment-row')).toHaveLength(1));
    const lag = within(table).getByTestId('merge-lag');
    expect(lag.textContent).toBe('<1s');
    expect(Number(lag.getAttribute('data-lag-seconds'))).toBeCloseTo(0.004, 6);
  });

  it('shardLags falls back to the browser clock without merge_lag_seconds', () => {
    const now = Date.parse('2001-01-01T00:01:00Z');
    const lags = shardLags({ ...OVERVIEW, merge_lag_seconds: undefined }, now);
    expect(lags.get('shard-a')).toBe(60);
    expect(lags.get('shard-b')).toBe(30);
    expect(lags.get('shard-c')).toBeUndefined();
  });
});

describe('cleanup', () => {
  it('summarises what each kind of task did', () => {
    const t = (kind: string, result: Task['result'], state = 'done'): Task => ({ id: 'x', kind, store: 's', state, result });
    expect(taskResultSummary(t('cleanup', { passes: 1, versions_removed: 3, files_removed: 12, bytes_removed: 5 * 1024 * 1024, version: 9 }))).toBe(
      'removed 3 versions, 12 files; 5.0 MiB reclaimed',
    );
    expect(taskResultSummary(t('cleanup', { passes: 1, versions_removed: 1, files_removed: 1, bytes_removed: 1536 }))).toBe(
      'removed 1 version, 1 file; 1.5 KiB reclaimed',
    );
    // The API leaves zero counts out.
    expect(taskResultSummary(t('cleanup', { passes: 1, files_removed: 0, version: 9 }))).toBe('nothing to remove');
    expect(taskResultSummary(t('cleanup', null, 'running'))).toBe('');
    expect(taskResultSummary(t('merge', { passes: 1, generations: 2, rows: 1500, replaced: 10, version: 7 }))).toBe(
      '2 generations, 1,500 rows merged (10 replaced) → v7',
    );
    expect(taskResultSummary(t('merge', { passes: 0, generations: 0 }))).toBe('nothing pending');
    expect(taskResultSummary(t('compact', { passes: 1, fragments_removed: 8, fragments_added: 1, version: 12 }))).toBe('8 fragments → 1 → v12');
    expect(taskResultSummary(t('index', { columns: [{ Column: 'id', Built: true }, { Column: 'rollout_id', Built: false }] }))).toBe(
      '2 columns, 1 updated',
    );
  });

  it('tasks view: cleanup tasks listed with their result; the form enqueues one', async () => {
    const tasks: Task[] = [
      {
        id: 'c1', kind: 'cleanup', store: 'demo', state: 'done', attempts: 1, source: 'scheduler', created_at: '2024-01-02T00:00:00Z',
        result: { passes: 1, versions_removed: 40, files_removed: 120, bytes_removed: 3 * 1024 ** 3, version: 41 },
      },
      { id: 'c0', kind: 'cleanup', store: 'demo', state: 'running', attempts: 1, created_at: '2024-01-01T00:00:00Z' },
    ];
    const f = stubFetch({
      'GET /api/v1/tasks': () => ({ tasks }),
      'POST /api/v1/tasks': (c) => {
        const t: Task = { id: 'c2', ...(c.body as { kind: string; store: string }), state: 'queued', attempts: 0, created_at: '2024-01-03T00:00:00Z' };
        tasks.push(t);
        return jsonResponse(t, 201);
      },
    });
    renderAt('/tasks');
    const table = await screen.findByTestId('tasks-table');
    await waitFor(() => expect(within(table).getAllByTestId('task-row')).toHaveLength(2));
    const [done, running] = within(table).getAllByTestId('task-row');
    expect(done.textContent).toContain('cleanup');
    expect(within(done).getByTestId('task-result').textContent).toBe('removed 40 versions, 120 files; 3.0 GiB reclaimed');
    expect(done.querySelector('.badge-done')).not.toBeNull();
    expect(within(running).getByTestId('task-result').textContent).toBe('');

    const kind = screen.getByTestId('task-kind') as HTMLSelectElement;
    expect([...kind.options].map((o) => o.value)).toContain('cleanup');
    fireEvent.change(kind, { target: { value: 'cleanup' } });
    fireEvent.change(screen.getByTestId('task-store'), { target: { value: 'demo' } });
    fireEvent.submit(screen.getByTestId('task-form'));
    await waitFor(() => expect(within(table).getAllByTestId('task-row')).toHaveLength(3));
    expect(f.last('/api/v1/tasks', 'POST')!.body).toEqual({ kind: 'cleanup', store: 'demo' });
  });

  it('overview: Cleanup posts the task, follows it to done and shows what it reclaimed', async () => {
    let polls = 0;
    const task: Task = { id: 'cl-1', kind: 'cleanup', store: 'demo', state: 'queued', attempts: 0 };
    const f = stubFetch(
      overviewRoutes({
        'POST /api/v1/experiments/demo/cleanup': () => jsonResponse({ task, created: true }, 202),
        'GET /api/v1/tasks/cl-1': () =>
          ++polls > 1
            ? { ...task, state: 'done', result: { passes: 1, versions_removed: 2, files_removed: 5, bytes_removed: 2048, version: 6 } }
            : { ...task, state: 'running' },
      }),
    );
    renderAt('/experiments/demo');
    await screen.findByTestId('experiment-stats');
    const button = screen.getByTestId('cleanup-button');
    expect(button.textContent).toBe('Cleanup');
    // Beside merge and compact.
    expect(button.parentElement).toBe(screen.getByTestId('merge-button').parentElement);
    fireEvent.click(button);
    const t = await screen.findByTestId('action-task');
    expect(t.textContent).toContain('cleanup task');
    expect(t.textContent).toContain('cl-1');
    expect(f.to('/api/v1/experiments/demo/cleanup', 'POST')).toHaveLength(1);
    await waitFor(() => expect(screen.getByTestId('action-task').textContent).toContain('done'), { timeout: 5000 });
    expect(screen.getByTestId('action-task-result').textContent).toContain('removed 2 versions, 5 files; 2.0 KiB reclaimed');
    await waitFor(() => expect(f.to('/api/v1/experiments/demo').length).toBeGreaterThanOrEqual(2));
  });

  it('overview: a store that does not exist has no Cleanup button', async () => {
    stubFetch({
      'GET /api/v1/experiments/nope': () => jsonResponse({ error: { code: 'NOT_FOUND', message: 'store "nope" not found' } }, 404),
    });
    renderAt('/experiments/nope');
    await screen.findByTestId('store-missing');
    expect(screen.queryByTestId('cleanup-button')).toBeNull();
    expect(screen.queryByTestId('tags-panel')).toBeNull();
  });
});

describe('tags', () => {
  it('lists the tags from the worker route, newest version first', async () => {
    const f = stubFetch(
      overviewRoutes({
        'GET /api/v1/rollouts/demo/tags': () => ({
          tags: [
            { name: 'before-rl-step-100', version: 4, manifest_size: 900 },
            { name: 'best', version: 12, manifest_size: 950 },
          ],
        }),
      }),
    );
    renderAt('/experiments/demo');
    const table = await screen.findByTestId('tags-table');
    const rows = within(table).getAllByTestId('tag-row');
    expect(rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent))).toEqual([
      ['best', '12'],
      ['before-rl-step-100', '4'],
    ]);
    expect(f.to('/api/v1/rollouts/demo/tags')).toHaveLength(1);
    expect(screen.getByTestId('tags-panel').textContent).toContain('(2)');
  });

  it('says so when the store has no tags', async () => {
    stubFetch(overviewRoutes());
    renderAt('/experiments/demo');
    expect((await screen.findByTestId('tags-empty')).textContent).toContain('No tags');
  });

  it('explains a server that does not serve the worker routes (a master alone)', async () => {
    stubFetch(
      overviewRoutes({
        'GET /api/v1/rollouts/demo/tags': () => jsonResponse({ error: { code: 'NOT_FOUND', message: 'no such endpoint' } }, 404),
      }),
    );
    renderAt('/experiments/demo');
    expect((await screen.findByTestId('tags-unavailable')).textContent).toContain('/api/v1/rollouts/…/tags');
    expect(screen.queryByTestId('tags-table')).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull(); // not an error of the page
    expect(await screen.findByTestId('experiment-stats')).toBeTruthy();
  });

  it('shows another failure as the server said it', async () => {
    stubFetch(
      overviewRoutes({
        'GET /api/v1/rollouts/demo/tags': () => jsonResponse({ error: { code: 'STORAGE_UNAVAILABLE', message: 'bucket unreachable' } }, 503),
      }),
    );
    renderAt('/experiments/demo');
    expect((await screen.findByTestId('tags-error')).textContent).toContain('bucket unreachable');
  });

  it('api.listTags encodes the store name', async () => {
    const f = stubFetch({ 'GET /api/v1/rollouts/a%2Fb/tags': () => ({ tags: null }) });
    expect(await api.listTags('a/b')).toEqual([]);
    expect(f.calls).toHaveLength(1);
  });
});
