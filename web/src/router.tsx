// A dependency-free router on the History API. View state that a user may want to keep
// (page, filters, record source) lives in the query string, so reloads and links keep it.
import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from 'react';

const NAV_EVENT = 'lc:navigate';

function subscribe(cb: () => void): () => void {
  window.addEventListener('popstate', cb);
  window.addEventListener(NAV_EVENT, cb);
  return () => {
    window.removeEventListener('popstate', cb);
    window.removeEventListener(NAV_EVENT, cb);
  };
}

function snapshot(): string {
  return window.location.pathname + window.location.search;
}

export interface Location {
  pathname: string;
  search: URLSearchParams;
}

export function useLocation(): Location {
  const href = useSyncExternalStore(subscribe, snapshot, snapshot);
  const u = new URL(href, 'http://x');
  return { pathname: u.pathname, search: u.searchParams };
}

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === snapshot()) return;
  if (opts.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  window.dispatchEvent(new Event(NAV_EVENT));
}

/** Returns `pathname` with the given query parameters (empty values dropped). */
export function withQuery(pathname: string, params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' ) continue;
    q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${pathname}?${s}` : pathname;
}

/** Replaces some query parameters of the current location (undefined/"" removes one). */
export function updateQuery(changes: Record<string, string | number | undefined | null>, opts: { replace?: boolean } = {}): void {
  const u = new URL(snapshot(), 'http://x');
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined || v === null || v === '') u.searchParams.delete(k);
    else u.searchParams.set(k, String(v));
  }
  const s = u.searchParams.toString();
  navigate(s ? `${u.pathname}?${s}` : u.pathname, opts);
}

export function intParam(search: URLSearchParams, key: string, dflt = 0): number {
  const v = Number.parseInt(search.get(key) ?? '', 10);
  return Number.isFinite(v) && v >= 0 ? v : dflt;
}

type LinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & { to: string; replace?: boolean };

export function Link({ to, replace, onClick, ...rest }: LinkProps) {
  const handle = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    if (rest.target && rest.target !== '_self') return;
    e.preventDefault();
    navigate(to, { replace });
  };
  return <a href={to} onClick={handle} {...rest} />;
}
