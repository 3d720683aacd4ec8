import { api } from '../api';
import { ErrorBanner } from '../components';
import { usePoll } from '../live';
import { Link, updateQuery, useLocation } from '../router';
import { experimentHref } from './Experiments';
import { SqlView } from './Sql';

/** Stores offered by the picker (the reference offers up to 1000 too). */
export const PICKER_LIMIT = 1000;

/** SQL over any store: pick the store that is the table `records` (the others are tables under their names). */
export function GlobalSqlView() {
  const { search } = useLocation();
  const { data, error, loading } = usePoll('sql:stores', (signal) => api.listExperiments({ limit: PICKER_LIMIT }, signal), 30_000);
  const names = (data?.experiments ?? []).map((x) => x.name).sort();
  const asked = search.get('store') ?? '';
  const store = asked || names[0] || '';
  return (
    <section data-testid="global-sql" data-loading={loading ? 'true' : 'false'}>
      <div className="toolbar">
        <h1>SQL</h1>
        <label className="inline-select">
          <span className="muted small">store (the table records)</span>{' '}
          <select
            value={store}
            onChange={(e) => updateQuery({ store: e.target.value }, { replace: true })}
            data-testid="sql-store"
            aria-label="Store queried as the table records"
          >
            {asked && !names.includes(asked) ? <option value={asked}>{asked}</option> : null}
            {names.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        {store ? (
          <Link to={experimentHref(store)} className="small">
            open the store
          </Link>
        ) : null}
        {data && data.total > names.length ? (
          <span className="muted small">the first {names.length} of {data.total} stores are offered; ?store=NAME picks any</span>
        ) : null}
      </div>
      <ErrorBanner error={error} />
      {loading && !data ? <p className="muted">Loading stores…</p> : null}
      {data && !store ? <p className="muted">No stores yet: create one and append records, then query it here.</p> : null}
      {store ? <SqlView key={store} name={store} /> : null}
    </section>
  );
}
