import { useState } from 'react';
import { api } from '../api';
import { ErrorBanner } from '../components';
import { usePoll } from '../live';
import { Link } from '../router';
import { experimentHref } from './Experiments';
import { RecordDetail } from './Records';

/** One record on a page of its own: /experiments/:name/records/:id (a link someone can share). */
export function RecordView({ name, id }: { name: string; id: string }) {
  const { data, error, loading } = usePoll(JSON.stringify(['record', name, id]), (signal) => api.getRecord(name, id, signal));
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(window.location.href);
      setCopied(true);
      window.setTimeout(() => setCopied(false), 1500);
    } catch {
      // clipboard refused: the address bar still holds the link
    }
  };
  return (
    <section data-testid="record-view" data-loading={loading ? 'true' : 'false'}>
      <div className="toolbar">
        <h1>
          <Link to="/" className="crumb">
            Experiments
          </Link>
          <span className="crumb-sep">/</span>
          <Link to={experimentHref(name, 'records')} className="crumb mono">
            {name}
          </Link>
          <span className="crumb-sep">/</span>
          <span className="mono" data-testid="record-view-id">
            {id}
          </span>
        </h1>
        <span className="spacer" />
        <button type="button" onClick={() => void copy()} data-testid="copy-record-link" title="Copy a link to this record">
          {copied ? 'Copied' : 'Copy link'}
        </button>
      </div>
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
