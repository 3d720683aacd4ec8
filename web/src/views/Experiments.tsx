import { useEffect, useRef, useState } from 'react';
import { api, errorMessage, expCompacted, expFragments, expPending, expRows, FRAGMENTS_WARN, PAGE_SIZE, type Experiment, type Task } from '../api';
import { Badge, ErrorBanner, Pager, RelTime, StateBadge, StatusRows, Updated } from '../components';
import { fmtInt } from '../format';
import { useDebounced, usePoll } from '../live';
import { intParam, Link, navigate, updateQuery, useLocation } from '../router';
import { PENDING_WARN } from './pending';
import { LAG_WARN_SECONDS, MergeLag } from './lifecycle';

export const SEARCH_DEBOUNCE_MS = 300;

export function experimentHref(name: string, tab?: 'records' | 'sql'): string {
  return `/experiments/${encodeURIComponent(name)}${tab ? `/${tab}` : ''}`;
}

export function ExperimentsView() {
  const { search } = useLocation();
  const q = search.get('search') ?? '';
  const offset = intParam(search, 'offset');

  // The box updates at once; the URL (and the request) once typing pauses.
  const [text, setText] = useState(q);
  const debounced = useDebounced(text, SEARCH_DEBOUNCE_MS);
  const lastPushed = useRef(q);
  useEffect(() => {
    if (debounced.trim() === lastPushed.current) return;
    lastPushed.current = debounced.trim();
    updateQuery({ search: debounced.trim(), offset: undefined }, { replace: true });
  }, [debounced]);
  // Follow back/forward navigation.
  useEffect(() => {
    if (q !== lastPushed.current) {
      lastPushed.current = q;
      setText(q);
    }
  }, [q]);

  const key = JSON.stringify([q, offset]);
  const { data, error, loading, updatedAt } = usePoll(key, (signal) =>
    api.listExperiments({ search: q, limit: PAGE_SIZE, offset }, signal),
  );
  const rows = data?.experiments ?? [];
  const total = data?.total ?? 0;
  const first = rows.length ? offset + 1 : 0;
  const last = offset + rows.length;
  const pageRows = rows.reduce((n, x) => n + (expRows(x) ?? 0), 0);
  const pageFragments = rows.reduce((n, x) => n + (expFragments(x) ?? 0), 0);
  const needCompaction = rows.filter((x) => (expFragments(x) ?? 0) >= FRAGMENTS_WARN || x.needs_compaction === true).length;

  return (
    <section>
      <div className="toolbar">
        <h1>Experiments</h1>
        <input
          type="search"
          className="search"
          placeholder="Search experiments…"
          aria-label="Search experiments"
          data-testid="experiments-search"
          value={text}
          onChange={(e) => setText(e.target.value)}
        />
        <span className="spacer" />
        <Updated at={updatedAt} />
      </div>
      {data?.stale ? (
        <div className="banner banner-warn" data-testid="stale-hint">
          Statistics are stale: the master served cached values (storage or etcd was slow to answer). They refresh
          automatically.
        </div>
      ) : null}
      <ErrorBanner error={error} />
      {data ? (
        <div className="stats stats-compact" data-testid="experiments-stats">
          <div className="stat">
            <div className="stat-label">Experiments</div>
            <div className="stat-value">{fmtInt(total)}</div>
          </div>
          <div className="stat" title="Rows of the experiments on this page">
            <div className="stat-label">Rows (this page)</div>
            <div className="stat-value">{fmtInt(pageRows)}</div>
          </div>
          <div className="stat" title="Base-table fragments of the experiments on this page">
            <div className="stat-label">Fragments (this page)</div>
            <div className="stat-value">{fmtInt(pageFragments)}</div>
          </div>
          <div className="stat" title={`Experiments on this page with ${FRAGMENTS_WARN} or more fragments, or that the server says need compaction`}>
            <div className="stat-label">Needs compaction</div>
            <div className="stat-value" data-testid="needs-compaction-count">
              {fmtInt(needCompaction)}
            </div>
          </div>
        </div>
      ) : null}
      <div className="table-wrap">
        <table className="grid" data-testid="experiments-table" data-loading={loading ? 'true' : 'false'}>
          <thead>
            <tr>
              <th>Name</th>
              <th className="num">Rows</th>
              <th className="num" title={`Base-table fragments; highlighted from ${FRAGMENTS_WARN} (compaction recommended)`}>
                Fragments
              </th>
              <th className="num" title="Sealed WAL generations not yet merged into the base table (all shards)">
                Pending WAL gens
              </th>
              <th
                className="num"
                title={`How far the base table (what LanceDB reads) lags the WAL tail: the age of the oldest un-merged generation; highlighted above ${LAG_WARN_SECONDS} s`}
              >
                Base lag
              </th>
              <th>Last update</th>
              <th title="Whether the base table has been compacted (when the server says when: how long ago)">Compacted</th>
              <th title="Health of the store: merge backlog, compaction, statistics freshness">Status</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((x) => (
              <tr key={x.name} data-testid="experiment-row">
                <td>
                  <Link to={experimentHref(x.name)} className="mono">
                    {x.name}
                  </Link>
                </td>
                <td className="num">{fmtInt(expRows(x))}</td>
                <td className="num" data-testid="experiment-fragments">
                  <Fragments n={expFragments(x)} />
                </td>
                <td className="num">{fmtInt(expPending(x))}</td>
                <td className="num">
                  <MergeLag seconds={x.merge_lag_seconds} />
                </td>
                <td>
                  <RelTime value={x.last_updated} />
                </td>
                <td data-testid="experiment-compacted">
                  <Compacted exp={x} />
                </td>
                <td className="badges" data-testid="experiment-status">
                  <ExperimentStatus exp={x} />
                </td>
                <td className="nowrap">
                  <RowActions name={x.name} />
                </td>
              </tr>
            ))}
            <StatusRows cols={10} loading={loading} error={error} count={rows.length} empty={q ? `No experiment matches “${q}”.` : 'No experiments yet.'} />
          </tbody>
        </table>
      </div>
      <Pager
        canPrev={offset > 0}
        canNext={last < total}
        onPrev={() => updateQuery({ offset: Math.max(0, offset - PAGE_SIZE) || undefined })}
        onNext={() => updateQuery({ offset: offset + PAGE_SIZE })}
        info={data ? `${fmtInt(first)}–${fmtInt(last)} of ${fmtInt(total)}` : '…'}
      />
    </section>
  );
}

/** A fragment count, highlighted from FRAGMENTS_WARN. */
export function Fragments({ n }: { n: number | undefined }) {
  if (n !== undefined && n >= FRAGMENTS_WARN) {
    return (
      <span className="lag-warn" title={`${fmtInt(n)} fragments: compaction recommended (from ${FRAGMENTS_WARN})`} data-warn="true">
        {fmtInt(n)}
      </span>
    );
  }
  return <>{fmtInt(n)}</>;
}

/** The Compacted column: yes (and when, if known), no, or a dash when the server does not say. */
export function Compacted({ exp }: { exp: Experiment }) {
  const { compacted, at } = expCompacted(exp);
  if (compacted === undefined) return <span className="muted">—</span>;
  if (!compacted) {
    // Never compacted is only worth a warning once the fragments pile up.
    const many = (expFragments(exp) ?? 0) >= FRAGMENTS_WARN || exp.needs_compaction === true;
    return (
      <Badge kind={many ? 'warn' : 'muted'} title={many ? 'Not compacted, and many fragments: Optimize or Compact merges them' : 'Not compacted yet'}>
        no
      </Badge>
    );
  }
  return (
    <span>
      <Badge kind="done">yes</Badge> {at ? <RelTime value={at} /> : null}
    </span>
  );
}

/** The Optimize chain (merge → compact → index, each after the one before) and a lone index task,
 * from a row of the list. Optimize opens the tasks view with the chain picked out. */
export function RowActions({ name }: { name: string }) {
  const [busy, setBusy] = useState<'optimize' | 'index' | undefined>();
  const [error, setError] = useState<unknown>();
  const [indexTask, setIndexTask] = useState<Task | undefined>();
  const optimize = async () => {
    setBusy('optimize');
    setError(undefined);
    try {
      const r = await api.optimize(name);
      navigate(tasksHref(r.tasks.map((t) => t.id), r.ordered));
    } catch (e) {
      setError(e);
      setBusy(undefined);
    }
  };
  const index = async () => {
    setBusy('index');
    setError(undefined);
    try {
      setIndexTask(await api.createTask('index', name));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(undefined);
    }
  };
  return (
    <span className="row-actions">
      <button
        type="button"
        className="small-button primary"
        onClick={() => void optimize()}
        disabled={busy !== undefined}
        data-testid="optimize-button"
        title="Merge the WAL, then compact, then update the indexes: three tasks, each after the one before; opens the tasks"
      >
        {busy === 'optimize' ? 'Optimizing…' : 'Optimize'}
      </button>
      <button
        type="button"
        className="small-button"
        onClick={() => void index()}
        disabled={busy !== undefined}
        data-testid="index-button"
        title="Bring the store's indexes up to date (an index task)"
      >
        {busy === 'index' ? 'Indexing…' : 'Index'}
      </button>
      {indexTask ? (
        <Link to={taskHref(indexTask.id)} className="small" data-testid="index-task">
          index task <StateBadge state={indexTask.state} />
        </Link>
      ) : null}
      {error ? (
        <span className="error-text small" role="alert" data-testid="row-action-error">
          {errorMessage(error)}
        </span>
      ) : null}
    </span>
  );
}

/** The tasks view with some tasks picked out (ordered=false: enqueued without depends_on). */
export function tasksHref(ids: string[], ordered = true): string {
  const q = new URLSearchParams();
  if (ids.length) q.set('ids', ids.join(','));
  if (!ordered) q.set('unordered', '1');
  const s = q.toString();
  return s ? `/tasks?${s}` : '/tasks';
}

export function taskHref(id: string): string {
  return `/tasks/${encodeURIComponent(id)}`;
}

/** What needs attention in a store, or "ok": read error, merge backlog, compaction, stale statistics. */
export function ExperimentStatus({ exp }: { exp: Experiment }) {
  const items = [];
  if (exp.error) {
    items.push(
      <Badge key="error" kind="failed" title={exp.error}>
        error
      </Badge>,
    );
  }
  // The read limit is per shard: warn on the fullest shard when the shards are known.
  const shards = exp.shards ?? [];
  const pending = expPending(exp) ?? 0;
  const worst = shards.length ? Math.max(...shards.map((s) => s.pending_generations)) : pending;
  if (worst >= PENDING_WARN) {
    items.push(
      <Badge key="backlog" kind="warn" title="Merge is falling behind; reads of the WAL are refused at 4096 pending generations per shard">
        merge backlog
      </Badge>,
    );
  } else if (pending > 0) {
    items.push(
      <Badge key="pending" kind="info" title="Sealed WAL generations wait for the next merge; Fragments lags them">
        merge pending
      </Badge>,
    );
  }
  if (exp.needs_compaction) {
    items.push(
      <Badge key="compact" kind="warn" title="Many small fragments or deletions: compaction recommended">
        needs compaction
      </Badge>,
    );
  }
  if (exp.stale && !exp.error) {
    items.push(
      <Badge key="stale" kind="muted" title="Statistics served from cache (not refreshed yet or storage slow)">
        stale
      </Badge>,
    );
  }
  if (!items.length) {
    items.push(
      <Badge key="ok" kind="done" title="Merged, compact and statistics fresh">
        ok
      </Badge>,
    );
  }
  return <>{items}</>;
}
