import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App, matchRoute } from './App';
import type { Task } from './api';
import { stubFetch } from './test/fetchStub';

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

describe('tasks and workers', () => {
  it('lists tasks with state badges and enqueues a new one', async () => {
    const tasks: Task[] = [
      { id: 'a', kind: 'merge', store: 'demo', state: 'done', attempts: 1, created_at: '2024-01-01T00:00:00Z' },
      { id: 'b', kind: 'compact', store: 'demo', state: 'failed', attempts: 3, error: 'boom', created_at: '2024-01-02T00:00:00Z' },
    ];
    const f = stubFetch({
      'GET /api/v1/tasks': () => ({ tasks }),
      'POST /api/v1/tasks': (c) => {
        const body = c.body as { kind: string; store: string };
        const t: Task = { id: 'c', ...body, state: 'queued', attempts: 0, created_at: '2024-01-03T00:00:00Z' };
        tasks.push(t);
        return t;
      },
    });
    renderAt('/tasks');
    const table = await screen.findByTestId('tasks-table');
    await waitFor(() => expect(within(table).getAllByTestId('task-row')).toHaveLength(2));
    const rows = within(table).getAllByTestId('task-row');
    expect(rows[0].textContent).toContain('boom'); // newest first
    expect(rows[0].querySelector('.badge-failed')).not.toBeNull();
    expect(rows[1].querySelector('.badge-done')).not.toBeNull();

    fireEvent.change(screen.getByTestId('task-kind'), { target: { value: 'compact' } });
    fireEvent.change(screen.getByTestId('task-store'), { target: { value: 'other' } });
    fireEvent.submit(screen.getByTestId('task-form'));
    await waitFor(() => expect(within(table).getAllByTestId('task-row')).toHaveLength(3));
    expect(f.last('/api/v1/tasks', 'POST')!.body).toEqual({ kind: 'compact', store: 'other' });
    expect(screen.getByTestId('task-created').textContent).toContain('queued');
  });

  it('lists workers', async () => {
    stubFetch({
      'GET /api/v1/workers': () => ({
        workers: [
          { instance_id: 'w-1', shard_id: 's-1', endpoint: 'http://10.0.0.1:8081', version: '0.1.0', registered_at: '2024-01-01T00:00:00Z' },
        ],
      }),
    });
    renderAt('/workers');
    const table = await screen.findByTestId('workers-table');
    await waitFor(() => expect(within(table).getAllByTestId('worker-row')).toHaveLength(1));
    expect(table.textContent).toContain('http://10.0.0.1:8081');
    expect(table.textContent).toContain('s-1');
  });

  it('routes', () => {
    expect(matchRoute('/')).toEqual({ view: 'experiments' });
    expect(matchRoute('/tasks/')).toEqual({ view: 'tasks' });
    expect(matchRoute('/experiments/a%2Fb.c/records')).toEqual({ view: 'experiment', name: 'a/b.c', tab: 'records' });
    expect(matchRoute('/experiments/x')).toEqual({ view: 'experiment', name: 'x', tab: 'overview' });
    expect(matchRoute('/nope')).toEqual({ view: 'notfound' });
  });
});
