import { useState, type FormEvent } from 'react';
import { api, type Task, type TaskKind } from '../api';
import { ErrorBanner, RelTime, StateBadge, StatusRows, Updated } from '../components';
import { usePoll } from '../live';
import { Link } from '../router';
import { experimentHref } from './Experiments';
import { taskResultSummary } from './lifecycle';

function byNewest(a: Task, b: Task): number {
  return (b.created_at ?? '').localeCompare(a.created_at ?? '');
}

export function TasksView() {
  const { data, error, loading, updatedAt, reload } = usePoll('tasks', (signal) => api.listTasks(signal));
  const tasks = [...(data?.tasks ?? [])].sort(byNewest);
  return (
    <section>
      <div className="toolbar">
        <h1>Tasks</h1>
        <span className="spacer" />
        <Updated at={updatedAt} />
      </div>
      <EnqueueForm onCreated={reload} />
      <ErrorBanner error={error} />
      <div className="table-wrap">
        <table className="grid" data-testid="tasks-table" data-loading={loading ? 'true' : 'false'}>
          <thead>
            <tr>
              <th>id</th>
              <th>Kind</th>
              <th>Store</th>
              <th>State</th>
              <th className="num">Attempts</th>
              <th>Created</th>
              <th>Updated</th>
              <th title="What a finished task did">Result</th>
              <th>Error</th>
            </tr>
          </thead>
          <tbody>
            {tasks.map((t) => (
              <tr key={t.id} data-testid="task-row">
                <td className="mono">{t.id}</td>
                <td>{t.kind}</td>
                <td>
                  <Link to={experimentHref(t.store)} className="mono">
                    {t.store}
                  </Link>
                </td>
                <td>
                  <StateBadge state={t.state} />
                </td>
                <td className="num">{t.attempts ?? ''}</td>
                <td>
                  <RelTime value={t.created_at} />
                </td>
                <td>
                  <RelTime value={t.updated_at} />
                </td>
                <td data-testid="task-result">{taskResultSummary(t)}</td>
                <td className="error-text">{t.error ?? ''}</td>
              </tr>
            ))}
            <StatusRows cols={9} loading={loading} error={error} count={tasks.length} empty="No tasks." />
          </tbody>
        </table>
      </div>
    </section>
  );
}

function EnqueueForm({ onCreated }: { onCreated: () => void }) {
  const [kind, setKind] = useState<TaskKind>('merge');
  const [store, setStore] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [created, setCreated] = useState<Task | undefined>();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const name = store.trim();
    if (!name) return;
    setBusy(true);
    setError(undefined);
    try {
      setCreated(await api.createTask(kind, name));
      onCreated();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="inline-form" onSubmit={submit} data-testid="task-form">
      <label>
        <span>Kind</span>
        <select value={kind} onChange={(e) => setKind(e.target.value as TaskKind)} data-testid="task-kind">
          <option value="merge">merge</option>
          <option value="compact">compact</option>
          <option value="index">index</option>
          <option value="cleanup">cleanup</option>
        </select>
      </label>
      <label>
        <span>Store</span>
        <input
          value={store}
          onChange={(e) => setStore(e.target.value)}
          placeholder="experiment name"
          required
          data-testid="task-store"
          spellCheck={false}
        />
      </label>
      <button type="submit" className="primary" disabled={busy || !store.trim()} data-testid="task-submit">
        {busy ? 'Enqueuing…' : 'Enqueue'}
      </button>
      {created ? (
        <span className="muted small" data-testid="task-created">
          enqueued <span className="mono">{created.id}</span> <StateBadge state={created.state} />
        </span>
      ) : null}
      <ErrorBanner error={error} />
    </form>
  );
}
