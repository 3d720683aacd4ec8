import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { App } from './App';
import type { RolloutRecord } from './api';
import { matchRoute } from './App';
import { sniff } from './views/Rollout';
import { jsonResponse, stubFetch, type Call } from './test/fetchStub';

const RECORDS = '/api/v1/experiments/demo/records';

function turn(i: number, extra: Partial<RolloutRecord> = {}): RolloutRecord {
  return {
    id: `t${String(i).padStart(3, '0')}`,
    rollout_id: 'r1',
    sequence_order: i,
    role: i % 2 ? 'assistant' : 'user',
    content: `turn ${i}`,
    created_at: '2026-01-01T10:00:00Z',
    ...extra,
  };
}

/** A listing that serves `all` (the rollout's rows, in listing order) in pages. */
function listing(rows: RolloutRecord[]) {
  return (c: Call) => {
    const q = c.url.searchParams;
    const want = q.get('rollout_id');
    const limit = Number(q.get('limit'));
    const offset = Number(q.get('offset'));
    const match = rows.filter((r) => r.rollout_id === want);
    return { records: match.slice(offset, offset + limit), has_more: offset + limit < match.length, limit, offset, source: q.get('source') };
  };
}

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

let created: string[];
beforeEach(() => {
  created = [];
  URL.createObjectURL = vi.fn((b: Blob) => {
    created.push(b.type);
    return `blob:test/${created.length}`;
  });
  URL.revokeObjectURL = vi.fn();
});
afterEach(() => {
  // jsdom has neither: remove the stubs again.
  delete (URL as { createObjectURL?: unknown }).createObjectURL;
  delete (URL as { revokeObjectURL?: unknown }).revokeObjectURL;
});

describe('rollout route', () => {
  it('matches /experiments/{name}/rollouts/{rollout_id} with encoded parts', () => {
    expect(matchRoute('/experiments/my%20exp/rollouts/r%2F1')).toEqual({ view: 'rollout', name: 'my exp', rolloutId: 'r/1' });
    expect(matchRoute('/experiments/demo/sql')).toEqual({ view: 'experiment', name: 'demo', tab: 'sql' });
  });
});

describe('payload sniffing', () => {
  const bytes = (...xs: number[]) => new Uint8Array(xs);
  it('recognises images by their magic number', () => {
    expect(sniff(bytes(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0), true)).toBe('image/png');
    expect(sniff(bytes(0xff, 0xd8, 0xff, 0xe0), true)).toBe('image/jpeg');
    expect(sniff(new TextEncoder().encode('GIF89a'), true)).toBe('image/gif');
    expect(sniff(new TextEncoder().encode('RIFF\0\0\0\0WEBPVP8 '), true)).toBe('image/webp');
  });
  it('recognises UTF-8 text, and refuses binary', () => {
    expect(sniff(new TextEncoder().encode('héllo\nworld\t!'), true)).toBe('text/plain');
    // A multi-byte character cut by a partial read is still text.
    expect(sniff(new TextEncoder().encode('abc é').subarray(0, 5), false)).toBe('text/plain');
    expect(sniff(new TextEncoder().encode('abc é').subarray(0, 5), true)).toBeUndefined();
    expect(sniff(bytes(0x00, 0x01, 0x02), true)).toBeUndefined();
    expect(sniff(bytes(0xc3, 0x28), true)).toBeUndefined();
    expect(sniff(bytes(), true)).toBeUndefined();
  });
});

describe('conversation view', () => {
  it('reads every page of the rollout from source=all and shows the turns in sequence_order', async () => {
    // 150 turns served out of order across two pages (WAL rows first, then base rows).
    const rows = Array.from({ length: 150 }, (_, i) => turn(149 - i, { reward: i === 0 ? 1 : null, num_input_tokens: 10, num_output_tokens: 5 }));
    rows.push(turn(7, { rollout_id: 'other' }));
    const f = stubFetch({ [`GET ${RECORDS}`]: listing(rows) });
    renderAt('/experiments/demo/rollouts/r1');
    const conv = await screen.findByTestId('conversation');
    const calls = f.to(RECORDS);
    expect(calls).toHaveLength(2);
    for (const c of calls) {
      expect(c.url.searchParams.get('source')).toBe('all');
      expect(c.url.searchParams.get('rollout_id')).toBe('r1');
      expect(c.url.searchParams.get('limit')).toBe('100');
    }
    expect(calls[1].url.searchParams.get('offset')).toBe('100');
    const turns = within(conv).getAllByTestId('turn');
    expect(turns).toHaveLength(150);
    expect(turns.map((t) => t.getAttribute('data-record-id')).slice(0, 3)).toEqual(['t000', 't001', 't002']);
    expect(turns[0].getAttribute('data-role')).toBe('user');
    expect(turns[1].getAttribute('data-role')).toBe('assistant');
    expect(within(turns[0]).getByTestId('turn-content').textContent).toBe('turn 0');
    // The reward of turn 149 and per-turn tokens.
    expect(turns[149].textContent).toContain('reward 1');
    expect(turns[0].textContent).toContain('tokens 10 in / 5 out');
    const summary = screen.getByTestId('rollout-summary').textContent!;
    expect(summary).toContain('Turns150');
    expect(summary).toContain('Total reward1');
    expect(summary).toContain('Output tokens750');
  });

  it('previews an image payload and a text payload through the blob route', async () => {
    const rows = [
      turn(0, { id: 'img', payload_size: 4, content: 'look at this' }),
      turn(1, { id: 'txt', payload_size: 11, content: 'a file' }),
    ];
    const f = stubFetch({
      [`GET ${RECORDS}`]: listing(rows),
      'GET /api/v1/experiments/demo/records/img/blob': () =>
        new Response(new Uint8Array([0x89, 0x50, 0x4e, 0x47]), { headers: { 'Content-Type': 'image/png' } }),
      'GET /api/v1/experiments/demo/records/txt/blob': () =>
        new Response('hello, blob', { headers: { 'Content-Type': 'text/plain; charset=utf-8' } }),
    });
    renderAt('/experiments/demo/rollouts/r1');
    const turns = await screen.findAllByTestId('turn');
    await waitFor(() => expect(within(turns[0]).getByTestId('payload-preview').getAttribute('data-kind')).toBe('image'));
    const img = within(turns[0]).getByRole('img');
    expect(img.getAttribute('src')).toMatch(/^blob:test\//);
    expect(created).toContain('image/png');
    await waitFor(() => expect(within(turns[1]).getByTestId('payload-preview').getAttribute('data-kind')).toBe('text'));
    expect(turns[1].textContent).toContain('hello, blob');
    expect(f.to('/api/v1/experiments/demo/records/img/blob')).toHaveLength(1);
  });

  it('previews payloads the server serves as application/octet-stream by their bytes', async () => {
    const rows = [turn(0, { id: 'img', payload_size: 9 }), turn(1, { id: 'txt', payload_size: 5 }), turn(2, { id: 'bin', payload_size: 3 })];
    stubFetch({
      [`GET ${RECORDS}`]: listing(rows),
      'GET /api/v1/experiments/demo/records/img/blob': () =>
        new Response(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]), { headers: { 'Content-Type': 'application/octet-stream' } }),
      'GET /api/v1/experiments/demo/records/txt/blob': () => new Response('plain', { headers: { 'Content-Type': 'application/octet-stream' } }),
      'GET /api/v1/experiments/demo/records/bin/blob': () => new Response(new Uint8Array([0, 1, 2]), { headers: { 'Content-Type': 'application/octet-stream' } }),
    });
    renderAt('/experiments/demo/rollouts/r1');
    const turns = await screen.findAllByTestId('turn');
    const kind = (i: number) => within(turns[i]).getByTestId('payload-preview').getAttribute('data-kind');
    await waitFor(() => expect([kind(0), kind(1), kind(2)]).toEqual(['image', 'text', 'binary']));
    expect(turns[0].textContent).toContain('image/png (detected)');
    expect(created).toContain('image/png');
    expect(turns[1].textContent).toContain('plain');
  });

  it('loads a large payload only on request', async () => {
    const f = stubFetch({
      [`GET ${RECORDS}`]: listing([turn(0, { id: 'big', payload_size: 50 << 20 })]),
      'GET /api/v1/experiments/demo/records/big/blob': () => new Response(new Uint8Array([0, 1, 2]), { headers: { 'Content-Type': 'application/octet-stream' } }),
    });
    renderAt('/experiments/demo/rollouts/r1');
    const load = await screen.findByTestId('payload-load');
    expect(f.to('/api/v1/experiments/demo/records/big/blob')).toHaveLength(0);
    fireEvent.click(load);
    await waitFor(() => expect(screen.getByTestId('payload-preview').getAttribute('data-kind')).toBe('binary'));
    expect(f.to('/api/v1/experiments/demo/records/big/blob')).toHaveLength(1);
  });

  it('says so when no record has the rollout id', async () => {
    stubFetch({ [`GET ${RECORDS}`]: listing([turn(0)]) });
    renderAt('/experiments/demo/rollouts/nope');
    expect((await screen.findByTestId('rollout-empty')).textContent).toContain('nope');
  });

  it('shows the API error of a missing store', async () => {
    stubFetch({ [`GET ${RECORDS}`]: () => jsonResponse({ error: { code: 'not_found', message: 'store "demo" not found' } }, 404) });
    renderAt('/experiments/demo/rollouts/r1');
    expect((await screen.findByRole('alert')).textContent).toContain('store "demo" not found');
  });

  it('opens from a record of the records listing', async () => {
    const rows = [turn(1), turn(0)];
    stubFetch({
      [`GET ${RECORDS}`]: (c: Call) =>
        c.url.searchParams.get('rollout_id') ? listing(rows)(c) : { records: rows, has_more: false, limit: 25, offset: 0, source: 'fragments' },
    });
    renderAt('/experiments/demo/records');
    const rowEls = await screen.findAllByTestId('record-row');
    fireEvent.click(rowEls[0]);
    fireEvent.click(await screen.findByTestId('open-rollout'));
    await waitFor(() => expect(window.location.pathname).toBe('/experiments/demo/rollouts/r1'));
    const turns = await screen.findAllByTestId('turn');
    expect(turns.map((t) => t.getAttribute('data-record-id'))).toEqual(['t000', 't001']);
    // Back to the listing through the rollout_id link of a row, too.
    window.history.back();
    await screen.findAllByTestId('record-row');
    const link = screen.getAllByTestId('rollout-link')[0];
    expect(link.getAttribute('href')).toBe('/experiments/demo/rollouts/r1');
  });
});
