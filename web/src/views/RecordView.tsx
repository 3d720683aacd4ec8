import { api } from '../api';
import { CrumbBar, ErrorBanner } from '../components';
import { usePoll } from '../live';
import { experimentHref } from './Experiments';
import { RecordDetail } from './Records';

/** One record on a page of its own: /experiments/:name/records/:id (a link someone can share). */
export function RecordView({ name, id }: { name: string; id: string }) {
  const { data, error, loading } = usePoll(JSON.stringify(['record', name, id]), (signal) => api.getRecord(name, id, signal));
  return (
    <section data-testid="record-view" data-loading={loading ? 'true' : 'false'}>
      <CrumbBar
        name={name}
        storeHref={experimentHref(name, 'records')}
        leaf={id}
        leafTestId="record-view-id"
        copyTestId="copy-record-link"
        copyTitle="Copy a link to this record"
      />
      <ErrorBanner error={error} />
      {loading && !error ? <p className="muted">Loading…</p> : null}
      {data ? (
        <div className="table-wrap record-page">
          <RecordDetail store={name} record={data} standalone />
        </div>
      ) : null}
    </section>
  );
}
