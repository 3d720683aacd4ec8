import { useEffect, useRef, useState } from 'react';
import { api, PAGE_SIZE, type Experiment } from '../api';
import { Badge, ErrorBanner, Pager, RelTime, StatusRows, Updated } from '../components';
import { fmtInt } from '../format';
import { useDebounced, usePoll } from '../live';
import { intParam, Link, updateQuery, useLocation } from '../router';
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
      <div className="table-wrap">
        <table className="grid" data-testid="experiments-table" data-loading={loading ? 'true' : 'false'}>
          <thead>
            <tr>
              <th>Name</th>
              <th className="num">Rows</th>
              <th className="num">Fragments</th>
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
              <th title="Health of the store: merge backlog, compaction, statistics freshness">Status</th>
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
                <td className="num">{fmtInt(x.rows)}</td>
                <td className="num">{fmtInt(x.fragments)}</td>
                <td className="num">{fmtInt(x.pending_generations)}</td>
                <td className="num">
                  <MergeLag seconds={x.merge_lag_seconds} />
                </td>
                <td>
                  <RelTime value={x.last_updated} />
                </td>
                <td className="badges" data-testid="experiment-status">
                  <ExperimentStatus exp={x} />
                </td>
              </tr>
            ))}
            <StatusRows cols={7} loading={loading} error={error} count={rows.length} empty={q ? `No experiment matches “${q}”.` : 'No experiments yet.'} />
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
  const worst = shards.length ? Math.max(...shards.map((s) => s.pending_generations)) : exp.pending_generations;
  if (worst >= PENDING_WARN) {
    items.push(
      <Badge key="backlog" kind="warn" title="Merge is falling behind; reads of the WAL are refused at 4096 pending generations per shard">
        merge backlog
      </Badge>,
    );
  } else if (exp.pending_generations > 0) {
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
