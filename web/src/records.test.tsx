import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { RolloutRecord } from './api';
import { stubFetch, jsonResponse, type Call } from './test/fetchStub';

const RECORDS_PATH = '/api/v1/experiments/demo/records';

function makeRecord(i: number, source: string): RolloutRecord {
  return {
    id: `${source}-${i}`,
    rollout_id: `r${Math.floor(i / 3)}`,
    role: i % 2 ? 'assistant' : 'user',
    sequence_order: i % 3,
    created_at: '2024-05-01T12:00:00.123456789Z',
    content: `content of record ${i}`,
    reward: i === 0 ? 0.5 : null,
    output_logprobs: [-0.1, -0.25, -1.5],
    input_tokens: [1, 2, 3, 4],
    include_in_training: true,
    metadata: '{"k":"v"}',
    relationships: [{ target_id: 'x', relation: 'parent', weight: 1 }],
    payload_size: i === 0 ? 2048 : 0,
  };
}

/** A records endpoint with `total` rows per source (wal: 3, fragments: total, all: total + 3). */
function recordsBackend(total = 60) {
  const sizes: Record<string, number> = { fragments: total, wal: 3, all: total + 3 };
  return (c: Call) => {
    const source = c.url.searchParams.get('source') ?? 'fragments';
    const limit = Number(c.url.searchParams.get('limit') ?? 25);
    const offset = Number(c.url.searchParams.get('offset') ?? 0);
    const n = sizes[source] ?? 0;
    const records = [];
    for (let i = offset; i < Math.min(n, offset + limit); i++) records.push(makeRecord(i, source));
    return { records, has_more: offset + limit < n, limit, offset, source };
  };
}

function renderAt(path: string, props: { live?: boolean; intervalMs?: number } = {}) {
  window.history.replaceState(null, '', path);
  return render(<App live={props.live ?? false} intervalMs={props.intervalMs} />);
}

async function settled() {
  const table = await screen.findByTestId('records-table');
  await waitFor(() => expect(table.getAttribute('data-loading')).toBe('false'));
  return table;
}

describe('records view', () => {
  it('defaults to Fragments with the lag note and shows the server-echoed source', async () => {
    const f = stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend() });
    renderAt('/experiments/demo/records');
    const table = await settled();
    expect(f.last(RECORDS_PATH)!.url.searchParams.get('source')).toBe('fragments');
    expect(screen.getByTestId('source-tab-fragments').getAttribute('aria-selected')).toBe('true');
    expect(screen.getByTestId('source-tab-fragments').textContent).toBe('Fragments');
    expect(screen.getByTestId('source-tab-wal').textContent).toBe('WAL');
    expect(screen.getByTestId('source-tab-all').textContent).toBe('All');
    expect(screen.getByTestId('fragments-note').textContent).toMatch(/may lag/);
    expect(table.getAttribute('data-source')).toBe('fragments');
    expect(screen.getByTestId('records-source').textContent).toContain('fragments');
    expect(within(table).getAllByTestId('record-row')).toHaveLength(25);
  });

  it('switching the source resets the page to 0', async () => {
    const f = stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend() });
    renderAt('/experiments/demo/records?offset=50');
    await settled();
    expect(f.last(RECORDS_PATH)!.url.searchParams.get('offset')).toBe('50');
    expect(screen.getByTestId('page-info').textContent).toContain('page 3');

    fireEvent.click(screen.getByTestId('source-tab-wal'));
    const table = await settled();
    await waitFor(() => expect(table.getAttribute('data-source')).toBe('wal'));
    const last = f.last(RECORDS_PATH)!.url.searchParams;
    expect(last.get('source')).toBe('wal');
    expect(last.get('offset')).toBe('0');
    expect(screen.getByTestId('page-info').textContent).toContain('page 1');
    expect(within(table).getAllByTestId('record-row')).toHaveLength(3);
    expect(screen.queryByTestId('fragments-note')).toBeNull();
    expect(window.location.search).toBe('?source=wal');

    // Back to Fragments after paging: page resets again.
    fireEvent.click(screen.getByTestId('source-tab-all'));
    await waitFor(() => expect(table.getAttribute('data-source')).toBe('all'));
    fireEvent.click(screen.getByTestId('next-page'));
    await waitFor(() => expect(f.last(RECORDS_PATH)!.url.searchParams.get('offset')).toBe('25'));
    fireEvent.click(screen.getByTestId('source-tab-fragments'));
    await waitFor(() => expect(f.last(RECORDS_PATH)!.url.searchParams.get('source')).toBe('fragments'));
    expect(f.last(RECORDS_PATH)!.url.searchParams.get('offset')).toBe('0');
  });

  it('paginates with Prev/Next driven by offset and has_more', async () => {
    const f = stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend(60) });
    renderAt('/experiments/demo/records');
    await settled();
    const prev = screen.getByTestId('prev-page') as HTMLButtonElement;
    const next = screen.getByTestId('next-page') as HTMLButtonElement;
    expect(prev.disabled).toBe(true);
    expect(next.disabled).toBe(false);
    expect(screen.getByTestId('page-info').textContent).toBe('Rows 1–25 · page 1');

    fireEvent.click(next);
    await waitFor(() => expect(screen.getByTestId('page-info').textContent).toBe('Rows 26–50 · page 2'));
    expect(f.last(RECORDS_PATH)!.url.searchParams.get('offset')).toBe('25');
    expect(prev.disabled).toBe(false);
    expect(next.disabled).toBe(false);

    fireEvent.click(next);
    await waitFor(() => expect(screen.getByTestId('page-info').textContent).toBe('Rows 51–60 · page 3'));
    expect(next.disabled).toBe(true); // has_more is false
    expect(prev.disabled).toBe(false);

    fireEvent.click(prev);
    await waitFor(() => expect(screen.getByTestId('page-info').textContent).toBe('Rows 26–50 · page 2'));
    expect(f.last(RECORDS_PATH)!.url.searchParams.get('offset')).toBe('25');
  });

  it('applies filters on submit and resets the page', async () => {
    const f = stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend(60) });
    renderAt('/experiments/demo/records?source=all&offset=50');
    await settled();
    const before = f.to(RECORDS_PATH).length;

    fireEvent.change(screen.getByTestId('filter-role'), { target: { value: 'assistant' } });
    fireEvent.change(screen.getByTestId('filter-rollout_id'), { target: { value: 'r 7' } });
    fireEvent.change(screen.getByTestId('filter-include_in_training'), { target: { value: 'false' } });
    // Typing alone does not query.
    expect(f.to(RECORDS_PATH).length).toBe(before);

    fireEvent.submit(screen.getByTestId('filter-form'));
    await waitFor(() => expect(f.to(RECORDS_PATH).length).toBe(before + 1));
    const p = f.last(RECORDS_PATH)!.url.searchParams;
    expect(p.get('role')).toBe('assistant');
    expect(p.get('rollout_id')).toBe('r 7');
    expect(p.get('include_in_training')).toBe('false');
    expect(p.get('source')).toBe('all'); // source kept
    expect(p.get('offset')).toBe('0'); // page reset
    expect(p.has('dataset')).toBe(false);

    // Clear removes them.
    fireEvent.click(screen.getByTestId('filter-reset'));
    await waitFor(() => expect(f.last(RECORDS_PATH)!.url.searchParams.has('role')).toBe(false));
    expect((screen.getByTestId('filter-role') as HTMLInputElement).value).toBe('');
  });

  it('expands a row to every field, with a download link only when payload_size > 0', async () => {
    stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend(60) });
    renderAt('/experiments/demo/records');
    const table = await settled();
    const rows = within(table).getAllByTestId('record-row');
    expect(screen.queryByTestId('record-detail')).toBeNull();

    fireEvent.click(rows[0]);
    const detail = await screen.findByTestId('record-detail');
    expect(detail.getAttribute('data-record-id')).toBe('fragments-0');
    const field = (name: string) => detail.querySelector(`[data-field="${name}"] dd`)?.textContent ?? null;
    expect(field('rollout_id')).toBe('r0');
    expect(field('content')).toBe('content of record 0');
    expect(field('output_logprobs')).toBe('[3] -0.1, -0.25, -1.5');
    expect(field('input_tokens')).toBe('[4] 1, 2, 3, 4');
    expect(field('include_in_training')).toBe('true');
    expect(field('metadata')).toBe(JSON.stringify({ k: 'v' }, null, 2));
    expect(field('relationships')).toContain('parent');
    expect(field('grader_id')).toBe('null'); // absent fields are listed too
    for (const f of ['problem_id', 'model_output_string', 'ref_logprobs', 'loss_mask', 'advantage', 'payload_checksum']) {
      expect(detail.querySelector(`[data-field="${f}"]`)).not.toBeNull();
    }
    const link = within(detail).getByTestId('payload-download') as HTMLAnchorElement;
    expect(link.getAttribute('href')).toBe('/api/v1/experiments/demo/records/fragments-0/blob');
    expect(link.hasAttribute('download')).toBe(true);

    // Collapse, then expand a record without payload.
    fireEvent.click(rows[0]);
    await waitFor(() => expect(screen.queryByTestId('record-detail')).toBeNull());
    fireEvent.keyDown(rows[1], { key: 'Enter' });
    const other = await screen.findByTestId('record-detail');
    expect(other.getAttribute('data-record-id')).toBe('fragments-1');
    expect(within(other).queryByTestId('payload-download')).toBeNull();
  });

  it('shows the API error message', async () => {
    stubFetch({
      [`GET ${RECORDS_PATH}`]: () =>
        jsonResponse({ error: { code: 'unavailable', message: 'too many pending generations' } }, 503),
    });
    renderAt('/experiments/demo/records?source=wal');
    expect((await screen.findByRole('alert')).textContent).toContain('too many pending generations');
  });

  it('live refresh re-fetches without resetting page, source or filters', async () => {
    const f = stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend(60) });
    renderAt('/experiments/demo/records?source=all&offset=25&role=user', { live: true, intervalMs: 40 });
    await settled();
    fireEvent.click(within(screen.getByTestId('records-table')).getAllByTestId('record-row')[0]);
    await waitFor(() => expect(f.to(RECORDS_PATH).length).toBeGreaterThanOrEqual(3), { timeout: 2000 });
    for (const c of f.to(RECORDS_PATH)) {
      expect(c.url.searchParams.get('offset')).toBe('25');
      expect(c.url.searchParams.get('source')).toBe('all');
      expect(c.url.searchParams.get('role')).toBe('user');
    }
    expect(screen.getByTestId('record-detail')).toBeTruthy(); // the expansion survives refreshes
    expect(screen.getByTestId('page-info').textContent).toContain('page 2');
  });

  it('live refresh pauses while the page is hidden and can be turned off', async () => {
    const f = stubFetch({ [`GET ${RECORDS_PATH}`]: recordsBackend(60) });
    const vis = Object.getOwnPropertyDescriptor(Document.prototype, 'visibilityState');
    let state: DocumentVisibilityState = 'hidden';
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state });
    try {
      renderAt('/experiments/demo/records', { live: true, intervalMs: 30 });
      await settled();
      const n = f.to(RECORDS_PATH).length;
      await act(() => new Promise((r) => setTimeout(r, 150)));
      expect(f.to(RECORDS_PATH).length).toBe(n);

      state = 'visible';
      document.dispatchEvent(new Event('visibilitychange'));
      await waitFor(() => expect(f.to(RECORDS_PATH).length).toBeGreaterThan(n + 1));

      fireEvent.click(screen.getByTestId('live-toggle'));
      await act(() => new Promise((r) => setTimeout(r, 50)));
      const m = f.to(RECORDS_PATH).length;
      await act(() => new Promise((r) => setTimeout(r, 150)));
      expect(f.to(RECORDS_PATH).length).toBe(m);
    } finally {
      delete (document as { visibilityState?: unknown }).visibilityState;
      if (vis) Object.defineProperty(Document.prototype, 'visibilityState', vis);
    }
  });
});
