import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { Experiment } from './api';
import { stubFetch, type Call } from './test/fetchStub';
import { SEARCH_DEBOUNCE_MS } from './views/Experiments';

const LIST = '/api/v1/experiments';

function exp(i: number): Experiment {
  return {
    name: `run-${String(i).padStart(3, '0')}`,
    rows: 1000 + i,
    fragments: i % 7,
    pending_generations: i % 3,
    shards: [],
    unflushed_rows: 0,
    version: 3,
    last_updated: new Date(Date.now() - 90_000).toISOString(),
    last_compaction: null,
    needs_compaction: i === 1,
    stale: false,
  };
}

function listBackend(total = 60, stale = false) {
  const all = Array.from({ length: total }, (_, i) => exp(i));
  return (c: Call) => {
    const search = c.url.searchParams.get('search') ?? '';
    const limit = Number(c.url.searchParams.get('limit') ?? 25);
    const offset = Number(c.url.searchParams.get('offset') ?? 0);
    const hits = all.filter((e) => e.name.includes(search));
    return { experiments: hits.slice(offset, offset + limit), total: hits.length, stale };
  };
}

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('experiments view', () => {
  it('lists experiments with counts, relative time, marks and pagination', async () => {
    const f = stubFetch({ [`GET ${LIST}`]: listBackend(60) });
    renderAt('/');
    const table = await screen.findByTestId('experiments-table');
    await waitFor(() => expect(within(table).getAllByTestId('experiment-row')).toHaveLength(25));
    const first = within(table).getAllByTestId('experiment-row')[1];
    expect(within(first).getByRole('link').getAttribute('href')).toBe('/experiments/run-001');
    expect(first.textContent).toContain('1,001');
    expect(first.textContent).toContain('needs compaction');
    const time = first.querySelector('time')!;
    expect(time.textContent).toBe('1m ago');
    expect(time.getAttribute('title')).toContain(time.getAttribute('datetime')!);
    expect(screen.getByTestId('page-info').textContent).toBe('1–25 of 60');
    expect(screen.queryByTestId('stale-hint')).toBeNull();
    expect(f.last(LIST)!.url.searchParams.get('limit')).toBe('25');

    fireEvent.click(screen.getByTestId('next-page'));
    await waitFor(() => expect(screen.getByTestId('page-info').textContent).toBe('26–50 of 60'));
    expect(f.last(LIST)!.url.searchParams.get('offset')).toBe('25');
    fireEvent.click(screen.getByTestId('next-page'));
    await waitFor(() => expect(screen.getByTestId('page-info').textContent).toBe('51–60 of 60'));
    expect((screen.getByTestId('next-page') as HTMLButtonElement).disabled).toBe(true);
  }, 15_000); // three pages of 25 rows: slow on a loaded 2-core machine

  it('shows a stale hint when the list is stale', async () => {
    stubFetch({ [`GET ${LIST}`]: listBackend(3, true) });
    renderAt('/');
    expect((await screen.findByTestId('stale-hint')).textContent).toMatch(/stale/i);
  });

  it('debounces the search and queries the server once typing pauses', async () => {
    const f = stubFetch({ [`GET ${LIST}`]: listBackend(60) });
    renderAt('/?offset=25');
    await waitFor(() => expect(f.to(LIST).length).toBe(1));
    const box = screen.getByTestId('experiments-search');

    fireEvent.change(box, { target: { value: 'r' } });
    fireEvent.change(box, { target: { value: 'ru' } });
    fireEvent.change(box, { target: { value: 'run-00' } });
    await sleep(SEARCH_DEBOUNCE_MS / 3);
    expect(f.to(LIST).length).toBe(1); // nothing sent while typing

    await waitFor(() => expect(f.to(LIST).length).toBe(2));
    const p = f.last(LIST)!.url.searchParams;
    expect(p.get('search')).toBe('run-00');
    expect(p.get('offset')).toBe('0'); // a new search starts at the first page
    await sleep(SEARCH_DEBOUNCE_MS + 50);
    expect(f.to(LIST).map((c) => c.url.searchParams.get('search'))).toEqual([null, 'run-00']);
    await waitFor(() => expect(screen.getByTestId('page-info').textContent).toBe('1–10 of 10'));
    expect(window.location.search).toBe('?search=run-00');
  });

  it('navigates to an experiment from its link', async () => {
    stubFetch({
      [`GET ${LIST}`]: listBackend(3),
      'GET /api/v1/experiments/run-002': () => ({ ...exp(2), shards: [] }),
    });
    renderAt('/');
    fireEvent.click(await screen.findByRole('link', { name: 'run-002' }));
    expect(window.location.pathname).toBe('/experiments/run-002');
    expect(await screen.findByTestId('experiment-stats')).toBeTruthy();
  });
});
