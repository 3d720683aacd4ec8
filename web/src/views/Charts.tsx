import { lazy, Suspense, useEffect, useState } from 'react';
import { api, SOURCES, type Source } from '../api';
import { ErrorBanner, Updated } from '../components';
import { fmtInt, fmtNum } from '../format';
import { usePoll } from '../live';

// The drawing (visx and d3) is a chunk of its own, loaded while the charts are being computed.
const loadGrid = () => import('./ChartGrid');
const ChartGrid = lazy(() => loadGrid().then((m) => ({ default: m.ChartGrid })));

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
  useEffect(() => {
    void loadGrid(); // fetch the drawing code alongside the data
  }, []);
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
      {loading && !error ? <p className="muted">Loading charts…</p> : null}
      {data ? (
        <Suspense fallback={<p className="muted">Drawing charts…</p>}>
          <ChartGrid charts={data} />
        </Suspense>
      ) : null}
    </section>
  );
}

