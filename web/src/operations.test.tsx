// The reference's operations surface in the UI: list columns, Optimize and Index, task duration and
// detail, the global SQL page, the record deep link, the run comparison, and the conversation's
// tool-call JSON and logprobs.
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App, matchRoute } from './App';
import { ApiError, expCompacted, optimize, taskDuration, type Experiment, type Task } from './api';
import { stubFetch } from './test/fetchStub';

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

describe('experiments list: the reference columns and actions', () => {
  it('reads the reference field names, highlights 16+ fragments and shows Compacted', async () => {
    const experiments: Experiment[] = [
      // A newer server: both names. An older one: ours only. The reference's: its names only.
      { name: 'both', rows: 10, fragments: 20, pending_generations: 1, row_count: 10, fragment_count: 20, pending_wal_generations: 1, compacted: false },
      { name: 'ours', rows: 5, fragments: 2, pending_generations: 0, last_compaction: new Date(Date.now() - 60_000).toISOString() },
      { name: 'ref', row_count: 7, fragment_count: 3, pending_wal_generations: 4, compacted: true } as Experiment,
    ];
    stubFetch({ 'GET /api/v1/experiments': () => ({ experiments, total: 3 }) });
    renderAt('/');
    const table = await screen.findByTestId('experiments-table');
    await waitFor(() => expect(within(table).getAllByTestId('experiment-row')).toHaveLength(3));
    const [both, ours, ref] = within(table).getAllByTestId('experiment-row');
    expect(within(both).getByTestId('experiment-fragments').querySelector('[data-warn="true"]')?.textContent).toBe('20');
    expect(within(ours).getByTestId('experiment-fragments').querySelector('[data-warn="true"]')).toBeNull();
    expect(within(both).getByTestId('experiment-compacted').textContent).toBe('no');
    expect(within(ours).getByTestId('experiment-compacted').textContent).toMatch(/^yes/);
    expect(within(ref).getByTestId('experiment-compacted').textContent).toMatch(/^yes/);
    expect(ref.textContent).toContain('7');
    expect(ref.textContent).toContain('4');
    expect(screen.getByTestId('needs-compaction-count').textContent).toBe('1');
  });

  it('Optimize enqueues merge, compact after it, index after that, and opens the tasks', async () => {
    let n = 0;
    const f = stubFetch({
      'GET /api/v1/experiments': () => ({ experiments: [{ name: 'demo', rows: 1, fragments: 1, pending_generations: 1 }], total: 1 }),
      'POST /api/v1/tasks': (c) => {
        const b = c.body as { kind: string; store: string; depends_on?: string };
        return { id: `t${++n}`, kind: b.kind, store: b.store, state: 'queued', depends_on: b.depends_on ?? null };
      },
      'GET /api/v1/tasks': () => ({ tasks: [] }),
    });
    renderAt('/');
    fireEvent.click(await screen.findByTestId('optimize-button'));
    await waitFor(() => expect(window.location.pathname).toBe('/tasks'));
    expect(window.location.search).toBe('?ids=t1%2Ct2%2Ct3');
    expect(f.to('/api/v1/tasks', 'POST').map((c) => c.body)).toEqual([
      { kind: 'merge', store: 'demo' },
      { kind: 'compact', store: 'demo', depends_on: 't1' },
      { kind: 'index', store: 'demo', depends_on: 't2' },
    ]);
    expect((await screen.findByTestId('optimize-banner')).textContent).toContain('each task waits');
  });

  it('Optimize on a server without depends_on enqueues the rest without it and says so', async () => {
    const posted: unknown[] = [];
    const create = async (kind: string, store: string, dep?: string): Promise<Task> => {
      posted.push({ kind, dep });
      if (dep) throw new ApiError(400, 'INVALID_REQUEST', 'invalid JSON body: unknown field "depends_on"');
      return { id: `${kind}-1`, kind, store, state: 'queued' };
    };
    const r = await optimize('demo', create as never);
    expect(r.ordered).toBe(false);
    expect(r.tasks.map((t) => t.id)).toEqual(['merge-1', 'compact-1', 'index-1']);
    expect(posted).toEqual([{ kind: 'merge', dep: undefined }, { kind: 'compact', dep: 'merge-1' }, { kind: 'compact', dep: undefined }, { kind: 'index', dep: undefined }]);
    // Any other error stops the chain.
    await expect(optimize('demo', (async () => Promise.reject(new ApiError(404, 'NOT_FOUND', 'no store'))) as never)).rejects.toThrow('no store');
  });

  it('Index enqueues an index task and links to it', async () => {
    const f = stubFetch({
      'GET /api/v1/experiments': () => ({ experiments: [{ name: 'demo', rows: 1, fragments: 1, pending_generations: 0 }], total: 1 }),
      'POST /api/v1/tasks': () => ({ id: 'ix-1', kind: 'index', store: 'demo', state: 'queued' }),
    });
    renderAt('/');
    fireEvent.click(await screen.findByTestId('index-button'));
    const link = await screen.findByTestId('index-task');
    expect(link.getAttribute('href')).toBe('/tasks/ix-1');
    expect(f.last('/api/v1/tasks', 'POST')!.body).toEqual({ kind: 'index', store: 'demo' });
  });

  it('compacted falls back on what older servers send', () => {
    expect(expCompacted({ name: 'a', rows: 0, fragments: 0, pending_generations: 0 }).compacted).toBeUndefined();
    expect(expCompacted({ name: 'a', rows: 0, fragments: 16, pending_generations: 0 }).compacted).toBe(false);
    expect(expCompacted({ name: 'a', rows: 0, fragments: 1, pending_generations: 0, compacted: '2024-01-01T00:00:00Z' })).toEqual({
      compacted: true,
      at: '2024-01-01T00:00:00Z',
    });
  });
});

describe('tasks: duration and detail', () => {
  it('computes a duration from the server figure or the start and finish times', () => {
    const base: Task = { id: 'x', kind: 'merge', store: 's', state: 'done' };
    expect(taskDuration({ ...base, duration_ms: 1500 })).toEqual({ ms: 1500, running: false });
    expect(taskDuration({ ...base, duration_seconds: 2 })).toEqual({ ms: 2000, running: false });
    expect(taskDuration({ ...base, started_at: '2024-01-01T00:00:00Z', finished_at: '2024-01-01T00:00:03.250Z' })).toEqual({ ms: 3250, running: false });
    expect(taskDuration({ ...base, state: 'running', started_at: '2024-01-01T00:00:00Z' }, Date.parse('2024-01-01T00:00:10Z'))).toEqual({
      ms: 10000,
      running: true,
    });
    expect(taskDuration({ ...base, state: 'queued' })).toBeUndefined();
    expect(taskDuration({ ...base, started_at: '0001-01-01T00:00:00Z', finished_at: '0001-01-01T00:00:00Z' })).toBeUndefined();
  });

  it('lists the duration and the dependency, and opens a task with its result and error', async () => {
    const tasks: Task[] = [
      // This server's times are Unix ms.
      { id: 'm1', kind: 'merge', store: 'demo', state: 'done', attempts: 1, created_at: '2024-01-01T00:00:00Z', started_at: 1704067201000, finished_at: 1704067201400, result: { generations: 2, rows: 10 } },
      { id: 'c1', kind: 'compact', target: 'demo', store: '', state: 'failed', attempts: 3, created_at: '2024-01-01T00:00:02Z', depends_on: ['m1'], duration_ms: 2500, error: 'compaction failed: disk full', detail: 'gave up' },
    ];
    stubFetch({
      'GET /api/v1/tasks': () => ({ tasks }),
      'GET /api/v1/tasks/c1': () => tasks[1],
    });
    renderAt('/tasks?ids=m1,c1');
    const table = await screen.findByTestId('tasks-table');
    await waitFor(() => expect(within(table).getAllByTestId('task-row')).toHaveLength(2));
    const [c1, m1] = within(table).getAllByTestId('task-row');
    expect(within(m1).getByTestId('task-duration').textContent).toBe('400 ms');
    expect(within(c1).getByTestId('task-duration').textContent).toBe('2.5 s');
    expect(c1.textContent).toContain('demo'); // target when store is empty
    expect(c1.className).toBe('picked');
    fireEvent.click(within(c1).getByTestId('task-link'));
    await waitFor(() => expect(window.location.pathname).toBe('/tasks/c1'));
    expect((await screen.findByTestId('task-error')).textContent).toContain('disk full');
    expect(screen.getByTestId('task-detail-duration').querySelector('dd')?.textContent).toBe('2.5 s');
  });

  it('offers the repair kind', async () => {
    stubFetch({ 'GET /api/v1/tasks': () => ({ tasks: [] }) });
    renderAt('/tasks');
    const kinds = [...(await screen.findByTestId('task-kind')).querySelectorAll('option')].map((o) => o.value);
    expect(kinds).toContain('repair');
  });
});

describe('routes and pages', () => {
  it('routes the new pages', () => {
    expect(matchRoute('/experiments/a%2Fb/records/id%201')).toEqual({ view: 'record', name: 'a/b', id: 'id 1' });
    expect(matchRoute('/experiments/a/records')).toEqual({ view: 'experiment', name: 'a', tab: 'records' });
    expect(matchRoute('/tasks/t-1')).toEqual({ view: 'task', id: 't-1' });
    expect(matchRoute('/sql')).toEqual({ view: 'sql' });
    expect(matchRoute('/compare')).toEqual({ view: 'compare' });
  });

  it('a record deep link opens that record', async () => {
    const f = stubFetch({
      'GET /api/v1/experiments/demo/records/r%2F1': () => ({ record: { id: 'r/1', rollout_id: 'ro', role: 'assistant', content: 'hi', reward: 1 } }),
    });
    renderAt('/experiments/demo/records/r%2F1');
    const detail = await screen.findByTestId('record-detail');
    expect(detail.getAttribute('data-record-id')).toBe('r/1');
    expect(screen.getByTestId('record-view-id').textContent).toBe('r/1');
    expect(f.calls.some((c) => c.url.pathname === '/api/v1/experiments/demo/records/r%2F1')).toBe(true);
  });

  it('a missing record says so', async () => {
    stubFetch({ 'GET /api/v1/experiments/demo/records/nope': () => ({ record: null }) });
    renderAt('/experiments/demo/records/nope');
    expect((await screen.findByTestId('error')).textContent).toContain('no record "nope"');
  });

  it('the SQL page queries the store picked', async () => {
    const f = stubFetch({
      'GET /api/v1/experiments': () => ({ experiments: [{ name: 'b' }, { name: 'a' }], total: 2 }),
      'POST /api/v1/experiments/*': () => ({ columns: [{ name: 'n', type: 'BIGINT' }], rows: [[3]], row_count: 1, truncated: false, rows_scanned: 3, elapsed_ms: 1 }),
    });
    renderAt('/sql');
    const picker = (await screen.findByTestId('sql-store')) as HTMLSelectElement;
    await waitFor(() => expect(picker.value).toBe('a'));
    fireEvent.change(picker, { target: { value: 'b' } });
    await waitFor(() => expect(window.location.search).toBe('?store=b'));
    fireEvent.click(await screen.findByTestId('sql-run'));
    await screen.findByTestId('sql-results');
    expect(f.calls.filter((c) => c.method === 'POST').map((c) => c.url.pathname)).toEqual(['/api/v1/experiments/b/query']);
  });

  it('compares two stores on one chart', async () => {
    const charts = (v: [string, number][]) => ({
      reward_by_policy_version: v.map(([policy_version, mean]) => ({ policy_version, mean, p10: null, p90: null, count: 1 })),
      reward_over_time: [],
      length_hist: [],
      length_over_time: [],
      ingest_rate: [],
      pending: { wal_rows: 0, generations: 0 },
    });
    const f = stubFetch({
      'GET /api/v1/experiments': () => ({ experiments: [{ name: 'run-a' }, { name: 'run-b' }, { name: 'run-c' }], total: 3 }),
      'GET /api/v1/experiments/run-a/charts': () => charts([['step-1', 0.1], ['step-10', 0.9]]),
      'GET /api/v1/experiments/run-b/charts': () => charts([['step-2', 0.4]]),
    });
    renderAt('/compare');
    expect((await screen.findByTestId('compare-hint')).textContent).toContain('two or more');
    const boxes = await screen.findAllByTestId('compare-store');
    fireEvent.click(boxes.find((b) => b.getAttribute('data-store') === 'run-a')!);
    await waitFor(() => expect(window.location.search).toBe('?stores=run-a'));
    fireEvent.click(screen.getAllByTestId('compare-store').find((b) => b.getAttribute('data-store') === 'run-b')!);
    await waitFor(() => expect(window.location.search).toBe('?stores=run-a%2Crun-b'));
    const chart = await screen.findByTestId('chart-compare', {}, { timeout: 5000 });
    await waitFor(() => expect(chart.querySelectorAll('[data-series]')).toHaveLength(2));
    expect(chart.querySelector('svg')?.getAttribute('data-points')).toBe('3');
    expect(chart.textContent).toContain('run-a');
    expect(f.to('/api/v1/experiments/run-b/charts').length).toBeGreaterThan(0);
  });
});

describe('conversation: tool-call JSON and logprobs', () => {
  it('pretty-prints a tool call and shows logprobs', async () => {
    stubFetch({
      'GET /api/v1/experiments/demo/trajectories/r1': () => ({
        records: [
          { id: 'a', rollout_id: 'r1', sequence_order: 0, role: 'assistant', content: '{"name":"search","arguments":"{\\"q\\":\\"x\\"}"}', output_tokens: [11, 12], output_logprobs: [-0.01, -2.5] },
          { id: 'b', rollout_id: 'r1', sequence_order: 1, role: 'tool', content: 'plain text answer' },
        ],
      }),
    });
    renderAt('/experiments/demo/rollouts/r1');
    const turns = await screen.findAllByTestId('turn');
    const json = within(turns[0]).getByTestId('turn-json');
    expect(json.textContent).toContain('"arguments": {\n    "q": "x"\n  }');
    const lp = within(turns[0]).getByTestId('turn-logprobs');
    expect(within(lp).getByTestId('logprob-summary-output').textContent).toContain('2');
    const toks = within(lp).getAllByTestId('logprob-token');
    expect(toks.map((t) => t.textContent)).toEqual(['11', '12']);
    expect(toks[1].className).toContain('lp-4');
    expect(within(turns[1]).queryByTestId('turn-json')).toBeNull();
    expect(within(turns[1]).queryByTestId('turn-logprobs')).toBeNull();
  });
});

