import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  api,
  ApiError,
  blobUrl,
  buildQuery,
  experimentsQueryString,
  parseError,
  recordsQueryString,
  request,
} from './api';
import { jsonResponse, stubFetch } from './test/fetchStub';

afterEach(() => vi.unstubAllGlobals());

describe('query strings', () => {
  it('records: source defaults to fragments, limit 25, offset 0', () => {
    expect(recordsQueryString()).toBe('?source=fragments&limit=25&offset=0');
    expect(recordsQueryString({})).toBe('?source=fragments&limit=25&offset=0');
  });

  it('records: explicit source, limit and offset', () => {
    expect(recordsQueryString({ source: 'wal', limit: 10, offset: 30 })).toBe('?source=wal&limit=10&offset=30');
    expect(recordsQueryString({ source: 'all' })).toBe('?source=all&limit=25&offset=0');
  });

  it('records: clamps limit to 1..100 and offset to >= 0', () => {
    expect(recordsQueryString({ limit: 1000 })).toContain('limit=100');
    expect(recordsQueryString({ limit: 0 })).toContain('limit=1');
    expect(recordsQueryString({ offset: -5 })).toContain('offset=0');
    expect(recordsQueryString({ limit: 12.7 })).toContain('limit=12');
  });

  it('records: includes only non-empty filters, encoded, in a stable order', () => {
    const q = recordsQueryString({
      source: 'all',
      offset: 25,
      filters: { role: 'assistant', rollout_id: 'r 1&x=y', dataset: '', problem_id: '  ', include_in_training: 'true' },
    });
    const p = new URLSearchParams(q.slice(1));
    expect(p.get('rollout_id')).toBe('r 1&x=y');
    expect(p.get('role')).toBe('assistant');
    expect(p.get('include_in_training')).toBe('true');
    expect(p.has('dataset')).toBe(false);
    expect(p.has('problem_id')).toBe(false);
    expect([...p.keys()]).toEqual(['source', 'limit', 'offset', 'rollout_id', 'role', 'include_in_training']);
  });

  it('records: drops an include_in_training that is not true/false', () => {
    expect(recordsQueryString({ filters: { include_in_training: 'maybe' } })).not.toContain('include_in_training');
    expect(recordsQueryString({ filters: { include_in_training: 'false' } })).toContain('include_in_training=false');
  });

  it('all the contract filters are passed through', () => {
    const filters = {
      id: 'a',
      rollout_id: 'b',
      problem_id: 'c',
      dataset: 'd',
      role: 'e',
      content_type: 'f',
      policy_version: '7',
      artifact_type: 'g',
      include_in_training: 'false',
    };
    const p = new URLSearchParams(recordsQueryString({ filters }).slice(1));
    for (const [k, v] of Object.entries(filters)) expect(p.get(k)).toBe(v);
  });

  it('experiments: search, limit, offset; empty values omitted', () => {
    expect(experimentsQueryString({})).toBe('');
    expect(experimentsQueryString({ search: '' })).toBe('');
    expect(experimentsQueryString({ search: 'grpo run', limit: 25, offset: 50 })).toBe(
      '?search=grpo+run&limit=25&offset=50',
    );
  });

  it('buildQuery skips null, undefined and blank values', () => {
    expect(buildQuery({ a: 1, b: null, c: undefined, d: ' ', e: false })).toBe('?a=1&e=false');
  });

  it('encodes store names and ids in paths', () => {
    expect(blobUrl('my.store', 'a/b c')).toBe('/api/v1/experiments/my.store/records/a%2Fb%20c/blob');
  });
});

describe('errors', () => {
  it('parses {"error":{"code","message"}}', async () => {
    const e = await parseError(jsonResponse({ error: { code: 'not_found', message: 'store "x" does not exist' } }, 404));
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(404);
    expect(e.code).toBe('not_found');
    expect(e.message).toBe('store "x" does not exist');
  });

  it('falls back to the body text, then the status line', async () => {
    const plain = await parseError(new Response('upstream timed out\n', { status: 502, statusText: 'Bad Gateway' }));
    expect(plain.message).toBe('upstream timed out');
    expect(plain.code).toBe('http_502');
    const empty = await parseError(new Response('', { status: 503, statusText: 'Service Unavailable' }));
    expect(empty.message).toBe('503 Service Unavailable');
    const noMessage = await parseError(jsonResponse({ error: { code: 'busy' } }, 503));
    expect(noMessage.code).toBe('busy');
    expect(noMessage.message).toMatch(/^503/);
  });

  it('request rejects with the API message on non-2xx', async () => {
    stubFetch({
      'GET /api/v1/experiments/x': () => jsonResponse({ error: { code: 'not_found', message: 'no such store' } }, 404),
    });
    await expect(api.getExperiment('x')).rejects.toMatchObject({ name: 'ApiError', status: 404, message: 'no such store' });
  });

  it('request turns network failures into ApiError status 0', async () => {
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => {
        throw new TypeError('Failed to fetch');
      }),
    );
    await expect(request('/api/v1/tasks')).rejects.toMatchObject({ status: 0, code: 'network' });
  });
});

describe('client calls', () => {
  it('listRecords sends the built query to the store path', async () => {
    const f = stubFetch({ 'GET /api/v1/experiments/demo/records': () => ({ records: [], has_more: false }) });
    await api.listRecords('demo', { source: 'wal', offset: 25, filters: { role: 'user' } });
    const url = f.calls[0].url;
    expect(url.pathname).toBe('/api/v1/experiments/demo/records');
    expect(url.search).toBe('?source=wal&limit=25&offset=25&role=user');
  });

  it('getExperiment asks for fresh statistics', async () => {
    const f = stubFetch({ 'GET /api/v1/experiments/demo': () => ({ name: 'demo' }) });
    await api.getExperiment('demo');
    expect(f.calls[0].url.searchParams.get('fresh')).toBe('true');
  });

  it('createTask posts JSON', async () => {
    const f = stubFetch({ 'POST /api/v1/tasks': (c) => ({ id: 't1', state: 'queued', ...(c.body as object) }) });
    const t = await api.createTask('compact', 'demo');
    expect(f.calls[0].body).toEqual({ kind: 'compact', store: 'demo' });
    const init = f.fn.mock.calls[0][1] as RequestInit;
    expect((init.headers as Record<string, string>)['Content-Type']).toBe('application/json');
    expect(t).toMatchObject({ id: 't1', kind: 'compact', store: 'demo' });
  });

  it('merge and compact post to the experiment', async () => {
    const f = stubFetch({
      'POST /api/v1/experiments/demo/merge': () => ({ task: { id: 'm' } }),
      'POST /api/v1/experiments/demo/compact': () => ({ task: { id: 'c' } }),
    });
    expect((await api.merge('demo')).task.id).toBe('m');
    expect((await api.compact('demo')).task.id).toBe('c');
    expect(f.calls.map((c) => c.method)).toEqual(['POST', 'POST']);
  });
});
