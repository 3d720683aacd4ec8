// Small shared pieces.
import type { ReactNode } from 'react';
import { errorMessage } from './api';
import { absTime, relTime } from './format';

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
