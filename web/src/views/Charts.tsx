import { useState } from 'react';
import { api, SOURCES, type Source } from '../api';
import { ErrorBanner, Updated } from '../components';
import { fmtInt, fmtNum } from '../format';
import { usePoll } from '../live';
import { lazyModule, useLazyModule } from './lazyModule';

const gridChunk = lazyModule(() => import('./ChartGrid'));

/** The charts read every row of the store: refresh them less often than the rest of the page. */
export const CHARTS_REFRESH_MS = 30_000;

const SOURCE_LABEL: Record<Source, string> = { fragments: 'Fragments', wal: 'WAL', all: 'All' };

/** The overview's charts, computed by the server (GET .../charts) over the chosen source. */
export function OverviewCharts({ name }: { name: string }) {
  const [source, setSource] = useState<Source>('all');
  const { data, error, loading, updatedAt } = usePoll(
    JSON.stringify(['charts', name, source]),
    (signal) => api.charts(name, source, signal),
    CHARTS_REFRESH_MS,
  );
  const { module: grid, error: gridError } = useLazyModule(gridChunk);
  return (
    <section className="charts-section" data-testid="charts" data-loading={loading ? 'true' : 'false'}>
      <h2 className="row">
        Charts
        <label className="muted small inline-select">
          source{' '}
          <select value={source} onChange={(e) => setSource(e.target.value as Source)} data-testid="charts-source">
            {SOURCES.map((s) => (
              <option key={s} value={s}>
                {SOURCE_LABEL[s]}
              </option>
            ))}
          </select>
        </label>
        {data && typeof data.rows_scanned === 'number' ? (
          <span className="muted small" data-testid="charts-meta">
            over {fmtInt(data.rows_scanned)} rows{typeof data.elapsed_ms === 'number' ? ` · ${fmtNum(data.elapsed_ms)} ms` : ''}
          </span>
        ) : null}
        <Updated at={updatedAt} />
      </h2>
      <ErrorBanner error={error} prefix="Charts" />
      <ErrorBanner error={gridError} prefix="Charts (loading the drawing code)" />
      {loading && !error ? <p className="muted">Loading charts…</p> : null}
      {data && grid ? <grid.ChartGrid charts={data} /> : null}
      {data && !grid && !gridError ? <p className="muted">Drawing charts…</p> : null}
    </section>
  );
}

