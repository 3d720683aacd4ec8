import { afterEach, describe, expect, it, vi } from 'vitest';
import { api } from './api';
import { PREFETCH_MAX_AGE_MS, takeChartsPrefetch } from './prefetch';

const answer = (body: unknown, status = 200) =>
  Promise.resolve(new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } }));

afterEach(() => {
  delete window.__lcChartsPrefetch;
  vi.unstubAllGlobals();
});

describe('charts prefetch', () => {
  it('is used once, for its store only', async () => {
    window.__lcChartsPrefetch = { name: 'a', at: Date.now(), res: answer({ rows_scanned: 7 }) };
    expect(await takeChartsPrefetch('b')).toBeUndefined();
    window.__lcChartsPrefetch = { name: 'a', at: Date.now(), res: answer({ rows_scanned: 7 }) };
    expect(await takeChartsPrefetch('a')).toEqual({ rows_scanned: 7 });
    expect(await takeChartsPrefetch('a')).toBeUndefined();
  });

  it('ignores an old, failed or error answer', async () => {
    window.__lcChartsPrefetch = { name: 'a', at: Date.now() - PREFETCH_MAX_AGE_MS - 1, res: answer({}) };
    expect(await takeChartsPrefetch('a')).toBeUndefined();
    window.__lcChartsPrefetch = { name: 'a', at: Date.now(), res: Promise.resolve(null) };
    expect(await takeChartsPrefetch('a')).toBeUndefined();
    window.__lcChartsPrefetch = { name: 'a', at: Date.now(), res: answer({ error: 'unauthorized' }, 401) };
    expect(await takeChartsPrefetch('a')).toBeUndefined();
  });

  it('api.charts takes the prefetch for source all, and asks the server otherwise', async () => {
    const fetchMock = vi.fn(() => answer({ rows_scanned: 3 }));
    vi.stubGlobal('fetch', fetchMock);
    window.__lcChartsPrefetch = { name: 'a', at: Date.now(), res: answer({ rows_scanned: 9 }) };
    expect(await api.charts('a', 'all')).toEqual({ rows_scanned: 9 });
    expect(fetchMock).not.toHaveBeenCalled();
    expect(await api.charts('a', 'all')).toEqual({ rows_scanned: 3 });
    expect(fetchMock).toHaveBeenCalledTimes(1);
  });
});
