import { api, errorMessage, SOURCES, type Charts, type Source } from '../api';
import { ErrorBanner, Updated } from '../components';
import { COMPARE_METRICS, MAX_COMPARE, mergeSeries, parseStores, type CompareMetric } from '../compare';
import { usePoll } from '../live';
import { Link, updateQuery, useLocation } from '../router';
import { experimentHref } from './Experiments';
import { CHARTS_REFRESH_MS } from './Charts';
import { PICKER_LIMIT } from './GlobalSql';
import { lazyModule, useLazyModule } from './lazyModule';

const chartChunk = lazyModule(() => import('./CompareChart'));

const SOURCE_LABEL: Record<Source, string> = { fragments: 'Fragments', wal: 'WAL', all: 'All' };

function parseMetric(v: string | null): CompareMetric {
  return COMPARE_METRICS.some((m) => m.id === v) ? (v as CompareMetric) : 'reward_by_version';
}

/** Runs side by side: one metric of 2 to 4 stores on one chart, from each store's charts. */
export function CompareView() {
  const { search } = useLocation();
  const stores = parseStores(search.get('stores'));
  const metric = parseMetric(search.get('metric'));
  const source: Source = search.get('source') === 'fragments' || search.get('source') === 'wal' ? (search.get('source') as Source) : 'all';
  const list = usePoll('compare:stores', (signal) => api.listExperiments({ limit: PICKER_LIMIT }, signal), 30_000);
  const names = (list.data?.experiments ?? []).map((x) => x.name).sort();

  const { data, loading, updatedAt } = usePoll(
    JSON.stringify(['compare', stores, source]),
    async (signal): Promise<{ charts: (Charts | undefined)[]; errors: (unknown | undefined)[] }> => {
      const got = await Promise.allSettled(stores.map((s) => api.charts(s, source, signal)));
      return {
        charts: got.map((g) => (g.status === 'fulfilled' ? g.value : undefined)),
        errors: got.map((g) => (g.status === 'rejected' ? g.reason : undefined)),
      };
    },
    CHARTS_REFRESH_MS,
  );
  const { module: chart, error: chartError } = useLazyModule(chartChunk);

  const setStores = (next: string[]) => updateQuery({ stores: next.join(',') || undefined }, { replace: true });
  const toggle = (name: string) =>
    setStores(stores.includes(name) ? stores.filter((s) => s !== name) : [...stores, name].slice(0, MAX_COMPARE));
  const fresh = data !== undefined && data.charts.length === stores.length;
  const series = fresh ? mergeSeries(data.charts, metric) : [];

  return (
    <section data-testid="compare" data-loading={loading ? 'true' : 'false'}>
      <div className="toolbar">
        <h1>Compare runs</h1>
        <label className="muted small inline-select">
          metric{' '}
          <select value={metric} onChange={(e) => updateQuery({ metric: e.target.value }, { replace: true })} data-testid="compare-metric">
            {COMPARE_METRICS.map((m) => (
              <option key={m.id} value={m.id}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        <label className="muted small inline-select">
          source{' '}
          <select
            value={source}
            onChange={(e) => updateQuery({ source: e.target.value === 'all' ? undefined : e.target.value }, { replace: true })}
            data-testid="compare-source"
          >
            {SOURCES.map((s) => (
              <option key={s} value={s}>
                {SOURCE_LABEL[s]}
              </option>
            ))}
          </select>
        </label>
        <span className="spacer" />
        <Updated at={updatedAt} />
      </div>
      <p className="note">
        Pick 2 to {MAX_COMPARE} stores (runs): their {COMPARE_METRICS.find((m) => m.id === metric)?.label.toLowerCase()} on
        one chart, policy versions in natural order (step-2 before step-10). Each store is read by its own charts query.
      </p>
      <ErrorBanner error={list.error} />
      <div className="store-picker" data-testid="compare-stores">
        {names.map((n) => {
          const on = stores.includes(n);
          return (
            <label key={n} className={on ? 'pick on' : 'pick'}>
              <input
                type="checkbox"
                checked={on}
                disabled={!on && stores.length >= MAX_COMPARE}
                onChange={() => toggle(n)}
                data-testid="compare-store"
                data-store={n}
              />{' '}
              <span className="mono">{n}</span>
            </label>
          );
        })}
        {list.data && !names.length ? <span className="muted">No stores yet.</span> : null}
      </div>
      {data?.errors.map((e, i) =>
        e ? (
          <div key={stores[i]} className="banner banner-error" role="alert" data-testid="error">
            <strong>
              <Link to={experimentHref(stores[i] ?? '')}>{stores[i]}</Link>:
            </strong>{' '}
            {errorMessage(e)}
          </div>
        ) : null,
      )}
      <ErrorBanner error={chartError} prefix="Chart (loading the drawing code)" />
      {stores.length < 2 ? (
        <p className="muted" data-testid="compare-hint">
          Pick {stores.length ? 'one more store' : 'two or more stores'} to compare.
        </p>
      ) : null}
      {stores.length >= 1 && fresh && chart ? <chart.CompareChart data={series} stores={stores} metric={metric} /> : null}
      {stores.length >= 1 && (!fresh || !chart) && !chartError ? <p className="muted">Loading charts…</p> : null}
    </section>
  );
}
