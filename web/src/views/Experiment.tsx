import { useEffect, useState, type ReactNode } from 'react';
import { api, ApiError, type Experiment, type Task } from '../api';
import { Badge, ErrorBanner, RelTime, StateBadge, Updated } from '../components';
import { fmtInt } from '../format';
import { usePoll } from '../live';
import { Link } from '../router';
import { experimentHref } from './Experiments';
import { OverviewCharts } from './Charts';
import { StoragePanel } from './Storage';
import { pendingRows, PENDING_WARN } from './pending';
import { MergeLag, shardLags, TagsPanel, taskResultSummary } from './lifecycle';
import { RecordsView } from './Records';
import { SqlView } from './Sql';

export { PENDING_WARN };


export type ExperimentTab = 'overview' | 'records' | 'sql';

export function ExperimentView({ name, tab }: { name: string; tab: ExperimentTab }) {
  return (
    <section>
      <div className="toolbar">
        <h1>
          <Link to="/" className="crumb">
            Experiments
          </Link>
          <span className="crumb-sep">/</span>
          <span className="mono">{name}</span>
        </h1>
      </div>
      <nav className="tabs" role="tablist" aria-label="Experiment views">
        <Link
          to={experimentHref(name)}
          role="tab"
          aria-selected={tab === 'overview'}
          className={tab === 'overview' ? 'tab active' : 'tab'}
          data-testid="tab-overview"
        >
          Overview
        </Link>
        <Link
          to={experimentHref(name, 'records')}
          role="tab"
          aria-selected={tab === 'records'}
          className={tab === 'records' ? 'tab active' : 'tab'}
          data-testid="tab-records"
        >
          Records
        </Link>
        <Link
          to={experimentHref(name, 'sql')}
          role="tab"
          aria-selected={tab === 'sql'}
          className={tab === 'sql' ? 'tab active' : 'tab'}
          data-testid="tab-sql"
        >
          SQL
        </Link>
      </nav>
      {tab === 'overview' ? <Overview name={name} /> : null}
      {tab === 'records' ? <RecordsView name={name} /> : null}
      {tab === 'sql' ? <SqlView name={name} /> : null}
    </section>
  );
}

function Stat({ label, children, title }: { label: string; children: ReactNode; title?: string }) {
  return (
    <div className="stat" title={title}>
      <div className="stat-label">{label}</div>
      <div className="stat-value">{children}</div>
    </div>
  );
}

const TASK_POLL_MS = 1500;

/** The overview's task buttons: each enqueues a task of that kind on the master. */
type Action = 'merge' | 'compact' | 'cleanup';

function Overview({ name }: { name: string }) {
  const { data, error, loading, updatedAt, reload } = usePoll(`exp:${name}`, (signal) =>
    api.getExperiment(name, true, signal),
  );
  const [task, setTask] = useState<Task | undefined>();
  const [actionError, setActionError] = useState<unknown>();
  const [busy, setBusy] = useState<Action | undefined>();

  const start = async (kind: Action) => {
    setBusy(kind);
    setActionError(undefined);
    try {
      const res = await api[kind](name);
      setTask(res.task);
    } catch (e) {
      setActionError(e);
    } finally {
      setBusy(undefined);
    }
  };

  // Follow the started task until it finishes, then refresh the statistics.
  const taskId = task?.id;
  const taskOpen = task !== undefined && (task.state === 'queued' || task.state === 'running');
  useEffect(() => {
    if (!taskId || !taskOpen) return;
    let cancelled = false;
    const t = window.setTimeout(async () => {
      try {
        const next = await api.getTask(taskId);
        if (cancelled) return;
        setTask(next);
        if (next.state === 'done' || next.state === 'failed') reload();
      } catch (e) {
        if (!cancelled) setActionError(e);
      }
    }, TASK_POLL_MS);
    return () => {
      cancelled = true;
      window.clearTimeout(t);
    };
  }, [taskId, taskOpen, task, reload]);

  // A store that does not exist has nothing to merge or compact (and no charts): say so instead.
  const missing = !data && error instanceof ApiError && error.status === 404;
  if (missing) {
    return (
      <div>
        <ErrorBanner error={error} />
        <p className="muted" data-testid="store-missing">
          No store named <span className="mono">{name}</span>. <Link to="/">Back to experiments</Link>
        </p>
      </div>
    );
  }

  return (
    <div>
      <ErrorBanner error={error} />
      {loading && !error ? <p className="muted">Loading…</p> : null}
      {data ? <Stats exp={data} updatedAt={updatedAt} /> : null}
      <div className="actions">
        <button
          type="button"
          onClick={() => void start('merge')}
          disabled={busy !== undefined}
          data-testid="merge-button"
          title="Fold the un-merged WAL generations into the base table"
        >
          {busy === 'merge' ? 'Merging…' : 'Merge WAL'}
        </button>
        <button
          type="button"
          onClick={() => void start('compact')}
          disabled={busy !== undefined}
          data-testid="compact-button"
          title="Bin-pack small base fragments and materialize deletions"
        >
          {busy === 'compact' ? 'Compacting…' : 'Compact'}
        </button>
        <button
          type="button"
          onClick={() => void start('cleanup')}
          disabled={busy !== undefined}
          data-testid="cleanup-button"
          title="Remove old versions of the base table and the files only they use (tagged, leased and recent versions stay)"
        >
          {busy === 'cleanup' ? 'Cleaning up…' : 'Cleanup'}
        </button>
        {task ? (
          <span className="task-inline" data-testid="action-task">
            {task.kind} task <span className="mono">{task.id}</span> <StateBadge state={task.state} />
            {task.error ? <span className="error-text"> {task.error}</span> : null}
            {taskResultSummary(task) ? <span data-testid="action-task-result"> {taskResultSummary(task)}</span> : null}{' '}
            <Link to="/tasks">all tasks</Link>
          </span>
        ) : null}
      </div>
      <ErrorBanner error={actionError} />
      {/* Not gated on the statistics: both requests go out at once. */}
      <OverviewCharts name={name} />
      <TagsPanel name={name} />
      <StoragePanel exp={data} />
    </div>
  );
}

function Stats({ exp, updatedAt }: { exp: Experiment; updatedAt: number | undefined }) {
  const shards = exp.shards ?? [];
  const lags = shardLags(exp);
  return (
    <>
      {exp.stale ? (
        <div className="banner banner-warn" data-testid="stale-hint">
          These statistics are stale (served from cache).
        </div>
      ) : null}
      <div className="stats" data-testid="experiment-stats">
        <Stat label="Rows">{fmtInt(exp.rows)}</Stat>
        <Stat label="Fragments">
          {fmtInt(exp.fragments)}{' '}
          {exp.needs_compaction ? (
            <Badge kind="warn" title="Compaction recommended">
              needs compaction
            </Badge>
          ) : null}
        </Stat>
        <Stat label="Version" title="Base table version">
          {fmtInt(exp.version)}
        </Stat>
        <Stat label="Pending WAL generations" title="Sealed generations not yet merged, over all shards">
          {fmtInt(exp.pending_generations)}
        </Stat>
        <Stat label="Rows in the WAL" title="Rows in sealed generations not yet merged (shown by the WAL and All sources)">
          {fmtInt(pendingRows(exp))}
        </Stat>
        <Stat label="Base lag" title="How far the base table (what LanceDB and the Fragments source read) lags the WAL tail: the age of the oldest un-merged generation">
          <MergeLag seconds={exp.merge_lag_seconds} />
        </Stat>
        <Stat label="Unflushed rows" title="Rows acknowledged but still in a memtable (readable after the next seal)">
          {fmtInt(exp.unflushed_rows)}
        </Stat>
        <Stat label="Last update">
          <RelTime value={exp.last_updated} />
        </Stat>
        <Stat label="Last compaction">
          <RelTime value={exp.last_compaction} />
        </Stat>
      </div>
      <h2>
        Shards <span className="muted small">({shards.length})</span> <Updated at={updatedAt} />
      </h2>
      <div className="table-wrap">
        <table className="grid" data-testid="shards-table">
          <thead>
            <tr>
              <th>Shard</th>
              <th className="num">Epoch</th>
              <th className="num" title="Merged up to this generation">
                Watermark
              </th>
              <th className="num">Pending generations</th>
              <th className="num" title="Rows in this shard's sealed, un-merged generations">
                Pending rows
              </th>
              <th className="num" title="Age of this shard's oldest un-merged generation">
                Lag
              </th>
            </tr>
          </thead>
          <tbody>
            {shards.map((s) => (
              <tr key={s.shard_id}>
                <td className="mono">{s.shard_id}</td>
                <td className="num">{fmtInt(s.epoch)}</td>
                <td className="num">{fmtInt(s.watermark)}</td>
                <td className="num">
                  {fmtInt(s.pending_generations)}{' '}
                  {s.pending_generations >= PENDING_WARN ? (
                    <Badge kind="warn" title="Merge is falling behind; reads are refused above 4096">
                      backlog
                    </Badge>
                  ) : null}
                </td>
                <td className="num">{fmtInt(s.pending_rows)}</td>
                <td className="num">
                  <MergeLag seconds={lags.get(s.shard_id)} />
                </td>
              </tr>
            ))}
            {shards.length === 0 ? (
              <tr>
                <td colSpan={6} className="empty">
                  No shard has written to this store yet.
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      </div>
    </>
  );
}

