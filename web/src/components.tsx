// Small shared pieces.
import { useState, type ReactNode } from 'react';
import { errorMessage } from './api';
import { absTime, relTime } from './format';
import { Link } from './router';

export function ErrorBanner({ error, prefix }: { error: unknown; prefix?: string }) {
  if (error === undefined || error === null) return null;
  return (
    <div className="banner banner-error" role="alert" data-testid="error">
      {prefix ? <strong>{prefix}: </strong> : null}
      {errorMessage(error)}
    </div>
  );
}

export function RelTime({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">—</span>;
  return (
    <time dateTime={value} title={absTime(value)}>
      {relTime(value)}
    </time>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <span className={`badge badge-${state.replace(/[^a-z_-]/gi, '')}`}>{state}</span>;
}

export function Badge({ kind, children, title }: { kind: string; children: ReactNode; title?: string }) {
  return (
    <span className={`badge badge-${kind}`} title={title}>
      {children}
    </span>
  );
}

export function Pager({
  canPrev,
  canNext,
  onPrev,
  onNext,
  info,
}: {
  canPrev: boolean;
  canNext: boolean;
  onPrev: () => void;
  onNext: () => void;
  info: ReactNode;
}) {
  return (
    <div className="pager">
      <button type="button" onClick={onPrev} disabled={!canPrev} data-testid="prev-page" aria-label="Previous page">
        ‹ Prev
      </button>
      <span className="page-info" data-testid="page-info">
        {info}
      </span>
      <button type="button" onClick={onNext} disabled={!canNext} data-testid="next-page" aria-label="Next page">
        Next ›
      </button>
    </div>
  );
}

export function Updated({ at }: { at: number | undefined }) {
  if (!at) return null;
  const iso = new Date(at).toISOString();
  return (
    <span className="muted small" title={absTime(iso)}>
      updated {new Date(at).toLocaleTimeString()}
    </span>
  );
}

/** The placeholder rows of a table body: an empty-state message once loaded
 * with no rows, and "Loading…" while the first fetch is in flight. */
export function StatusRows({
  cols,
  loading,
  error,
  count,
  empty,
  emptyTestId,
}: {
  cols: number;
  loading: boolean;
  error: unknown;
  count: number;
  empty: ReactNode;
  emptyTestId?: string;
}) {
  return (
    <>
      {!loading && count === 0 ? (
        <tr>
          <td colSpan={cols} className="empty" data-testid={emptyTestId}>
            {empty}
          </td>
        </tr>
      ) : null}
      {loading && !error ? (
        <tr>
          <td colSpan={cols} className="empty">
            Loading…
          </td>
        </tr>
      ) : null}
    </>
  );
}

/** The title bar of a page under a store: Experiments / store / leaf, and a
 *  button that copies the page's address (a link someone can share). */
export function CrumbBar({
  name,
  storeHref,
  leaf,
  leafTestId,
  copyTestId,
  copyTitle,
}: {
  name: string;
  storeHref: string;
  leaf: string;
  leafTestId: string;
  copyTestId: string;
  copyTitle: string;
}) {
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
    <div className="toolbar">
      <h1>
        <Link to="/" className="crumb">
          Experiments
        </Link>
        <span className="crumb-sep">/</span>
        <Link to={storeHref} className="crumb mono">
          {name}
        </Link>
        <span className="crumb-sep">/</span>
        <span className="mono" data-testid={leafTestId}>
          {leaf}
        </span>
      </h1>
      <span className="spacer" />
      <button type="button" onClick={() => void copy()} data-testid={copyTestId} title={copyTitle}>
        {copied ? 'Copied' : 'Copy link'}
      </button>
    </div>
  );
}
