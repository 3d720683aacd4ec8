import { useEffect, useState, type FormEvent } from 'react';
import { api, ApiError, TASK_KINDS, taskDeps, taskDuration, taskStore, toIso, type Task, type TaskKind } from '../api';
import { ErrorBanner, RelTime, StateBadge, StatusRows, Updated } from '../components';
import { absTime, fmtMillis } from '../format';
import { usePoll } from '../live';
import { Link, useLocation } from '../router';
import { experimentHref, taskHref } from './Experiments';
import { taskResultSummary } from './lifecycle';

function byNewest(a: Task, b: Task): number {
  return (b.created_at ?? '').localeCompare(a.created_at ?? '');
}

/** How long a task ran ("—" before it starts or when the server sends no times). */
export function Duration({ task }: { task: Task }) {
  // Re-render a running task's duration with the page's polls; no timer of its own.
  const d = taskDuration(task);
  if (!d) return <span className="muted">—</span>;
  return (
    <span className="mono" title={d.running ? 'running for' : undefined}>
      {fmtMillis(d.ms)}
      {d.running ? '…' : ''}
    </span>
  );
}

function DepLinks({ task }: { task: Task }) {
  const deps = taskDeps(task);
  if (!deps.length) return <span className="muted">—</span>;
  return (
    <>
      {deps.map((d, i) => (
        <span key={d}>
          {i ? ', ' : ''}
          <Link to={taskHref(d)} className="mono" title={`runs after task ${d}`}>
            {shortId(d)}
          </Link>
        </span>
      ))}
    </>
  );
}

/** The end of a UUIDv7 (its start is the time, the same for tasks made together). */
export function shortId(id: string): string {
  return id.length > 12 ? `…${id.slice(-8)}` : id;
}

export function TasksView() {
  const { search } = useLocation();
  const picked = new Set((search.get('ids') ?? '').split(',').filter(Boolean));
  const unordered = search.get('unordered') === '1';
  const { data, error, loading, updatedAt, reload } = usePoll('tasks', (signal) => api.listTasks(signal));
  const tasks = [...(data?.tasks ?? [])].sort(byNewest);
  return (
    <section>
      <div className="toolbar">
        <h1>Tasks</h1>
        <span className="spacer" />
        <Updated at={updatedAt} />
      </div>
      {picked.size ? (
        <div className={unordered ? 'banner banner-warn' : 'banner'} data-testid="optimize-banner">
          {unordered
            ? 'Optimize enqueued merge, compact and index. This server does not take depends_on, so they may run in any order; run Optimize again once they finish if compaction ran first.'
            : 'Optimize enqueued merge → compact → index: each task waits for the one before it.'}{' '}
          They are highlighted below.
        </div>
      ) : null}
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
              <th title="The task this one waits for">After</th>
              <th className="num">Attempts</th>
              <th>Created</th>
              <th className="num" title="How long it ran (from start to finish; while running, so far)">
                Duration
              </th>
              <th title="What a finished task did">Result</th>
              <th>Error</th>
            </tr>
          </thead>
          <tbody>
            {tasks.map((t) => (
              <tr key={t.id} data-testid="task-row" data-task-id={t.id} className={picked.has(t.id) ? 'picked' : undefined}>
                <td className="mono nowrap">
                  <Link to={taskHref(t.id)} title={`Details of task ${t.id}`} data-testid="task-link">
                    {shortId(t.id)}
                  </Link>
                </td>
                <td>{t.kind}</td>
                <td>
                  <Link to={experimentHref(taskStore(t))} className="mono">
                    {taskStore(t)}
                  </Link>
                </td>
                <td>
                  <StateBadge state={t.state} />
                </td>
                <td className="nowrap">
                  <DepLinks task={t} />
                </td>
                <td className="num">{t.attempts ?? ''}</td>
                <td className="nowrap">
                  <RelTime value={t.created_at} />
                </td>
                <td className="num nowrap" data-testid="task-duration">
                  <Duration task={t} />
                </td>
                <td data-testid="task-result">{taskResultSummary(t) || t.detail || ''}</td>
                <td className="error-text">{t.error ? (t.error.length > 160 ? `${t.error.slice(0, 159)}…` : t.error) : ''}</td>
              </tr>
            ))}
            <StatusRows cols={10} loading={loading} error={error} count={tasks.length} empty="No tasks." />
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Field({ label, children, testId }: { label: string; children: React.ReactNode; testId?: string }) {
  return (
    <div className="field" data-testid={testId}>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

function Time({ value: raw }: { value: string | number | null | undefined }) {
  const value = toIso(raw);
  if (!value || value.startsWith('0001-')) return <span className="muted">—</span>;
  return (
    <span className="mono" title={absTime(value)}>
      {value} <span className="muted">(<RelTime value={value} />)</span>
    </span>
  );
}

/** One task: what it is, when it ran, what it did or why it failed (GET /api/v1/tasks/{id}). */
export function TaskDetailView({ id }: { id: string }) {
  const { data: t, error, loading, updatedAt } = usePoll(`task:${id}`, (signal) => api.getTask(id, signal));
  const missing = !t && error instanceof ApiError && error.status === 404;
  const store = t ? taskStore(t) : '';
  return (
    <section data-testid="task-detail">
      <div className="toolbar">
        <h1>
          <Link to="/tasks" className="crumb">
            Tasks
          </Link>
          <span className="crumb-sep">/</span>
          <span className="mono">{id}</span>
        </h1>
        <span className="spacer" />
        <Updated at={updatedAt} />
      </div>
      <ErrorBanner error={error} />
      {missing ? (
        <p className="muted">
          No task <span className="mono">{id}</span> (finished tasks are pruned after a while). <Link to="/tasks">All tasks</Link>
        </p>
      ) : null}
      {loading && !error ? <p className="muted">Loading…</p> : null}
      {t ? (
        <>
          {t.error ? (
            <div className="banner banner-error task-error" data-testid="task-error">
              <strong>{t.state === 'failed' ? 'Failed' : `Attempt ${t.attempts ?? ''} failed`}:</strong> {t.error}
            </div>
          ) : null}
          <dl className="fields record-detail">
            <Field label="kind">{t.kind}</Field>
            <Field label="store">
              {store ? (
                <Link to={experimentHref(store)} className="mono">
                  {store}
                </Link>
              ) : (
                <span className="muted">—</span>
              )}
            </Field>
            <Field label="state" testId="task-state">
              <StateBadge state={t.state} />
            </Field>
            <Field label="after">
              <DepLinks task={t} />
            </Field>
            <Field label="attempts">{t.attempts ?? '—'}</Field>
            <Field label="source">{t.source ?? '—'}</Field>
            <Field label="enqueued">
              <Time value={t.enqueued_at ?? t.created_at} />
            </Field>
            <Field label="started">
              <Time value={t.started_at} />
            </Field>
            <Field label="finished">
              <Time value={t.finished_at} />
            </Field>
            <Field label="duration" testId="task-detail-duration">
              <Duration task={t} />
            </Field>
            <Field label="updated">
              <Time value={t.updated_at} />
            </Field>
            {t.not_before && !t.not_before.startsWith('0001-') ? (
              <Field label="not before">
                <Time value={t.not_before} />
              </Field>
            ) : null}
            {t.detail ? <Field label="detail">{t.detail}</Field> : null}
            <Field label="result" testId="task-detail-result">
              {t.result ? (
                <>
                  {taskResultSummary(t) || t.detail ? <div>{taskResultSummary(t) || t.detail}</div> : null}
                  <pre className="json">{JSON.stringify(t.result, null, 2)}</pre>
                </>
              ) : (
                <span className="muted">{t.state === 'done' ? 'none' : 'not finished'}</span>
              )}
            </Field>
          </dl>
        </>
      ) : null}
    </section>
  );
}

function EnqueueForm({ onCreated }: { onCreated: () => void }) {
  const [kind, setKind] = useState<TaskKind>('merge');
  const [store, setStore] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [created, setCreated] = useState<Task | undefined>();
  useEffect(() => setError(undefined), [kind, store]);

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
          {TASK_KINDS.map((k) => (
            <option key={k} value={k}>
              {k}
            </option>
          ))}
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
          enqueued <Link to={taskHref(created.id)} className="mono">{shortId(created.id)}</Link> <StateBadge state={created.state} />
        </span>
      ) : null}
      <ErrorBanner error={error} />
    </form>
  );
}
