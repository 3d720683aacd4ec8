import { fireEvent, render, screen, waitFor } from '@testing-library/react';
import { describe, expect, it, vi } from 'vitest';
import { App } from './App';
import { api, ApiError, type Experiment } from './api';
import { getToken } from './auth';
import { jsonResponse, stubFetch, type Call } from './test/fetchStub';

const TOKEN = 's3cret-token';
const EXP: Experiment = { name: 'demo', rows: 1, fragments: 1, pending_generations: 0, shards: [] };

/** Answers like httpapi.Auth: 401 unless the exact bearer token is sent. */
function guarded(body: (c: Call) => unknown) {
  return (c: Call) => {
    if (c.headers.get('Authorization') !== `Bearer ${TOKEN}`) {
      return jsonResponse({ error: { code: 'unauthorized', message: 'missing or wrong bearer token: send Authorization: Bearer <LC_API_TOKEN>' } }, 401);
    }
    return body(c);
  };
}

function backend() {
  return stubFetch({
    'GET /api/v1/experiments': guarded(() => ({ experiments: [EXP], total: 1, stale: false })),
    'GET /api/v1/experiments/demo': guarded(() => EXP),
    'GET /api/v1/experiments/demo/charts': guarded(() => ({
      reward_by_policy_version: [],
      reward_over_time: [],
      length_hist: [],
      length_over_time: [],
      ingest_rate: [],
      pending: { wal_rows: 0, generations: 0 },
    })),
  });
}

function renderAt(path: string) {
  window.history.replaceState(null, '', path);
  return render(<App live={false} />);
}

describe('sign-in', () => {
  it('without auth, never prompts and sends no Authorization header', async () => {
    const f = stubFetch({ 'GET /api/v1/experiments': () => ({ experiments: [EXP], total: 1 }) });
    renderAt('/');
    await screen.findByTestId('experiment-row');
    expect(screen.queryByTestId('signin')).toBeNull();
    expect(f.calls.every((c) => !c.headers.has('Authorization'))).toBe(true);
    expect(screen.queryByTestId('signout')).toBeNull();
  });

  it('asks once on 401 however many requests failed, then retries them all with the bearer token', async () => {
    const f = backend();
    renderAt('/experiments/demo');
    const prompt = await screen.findByTestId('signin');
    // Statistics and charts both got 401: one prompt.
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname.startsWith('/api/v1/experiments/demo')).length).toBeGreaterThanOrEqual(1));
    expect(screen.getAllByTestId('signin')).toHaveLength(1);
    expect(screen.getByTestId('signin-message').getAttribute('data-reason')).toBe('required');
    expect(screen.getByTestId('signin-message').textContent).toContain('LC_API_TOKEN');
    const input = screen.getByTestId('signin-token') as HTMLInputElement;
    expect(input.type).toBe('password');
    fireEvent.change(input, { target: { value: TOKEN } });
    fireEvent.submit(prompt);
    expect(await screen.findByTestId('experiment-stats')).toBeTruthy();
    await waitFor(() => expect(screen.getByTestId('charts').getAttribute('data-loading')).toBe('false'));
    expect(screen.queryByTestId('signin')).toBeNull();
    expect(window.sessionStorage.getItem('lc.token')).toBe(TOKEN);
    expect(window.localStorage.getItem('lc.token')).toBeNull();
    // Every retried call carried the token, and no URL ever did.
    const ok = f.calls.filter((c) => c.headers.get('Authorization') === `Bearer ${TOKEN}`);
    expect(ok.map((c) => c.url.pathname)).toEqual(expect.arrayContaining(['/api/v1/experiments/demo', '/api/v1/experiments/demo/charts']));
    expect(f.calls.some((c) => c.url.href.includes(TOKEN))).toBe(false);
    expect(screen.getByTestId('signout')).toBeTruthy();
  });

  it('uses the kept token on the next request without asking', async () => {
    window.sessionStorage.setItem('lc.token', TOKEN);
    const f = backend();
    renderAt('/');
    await screen.findByTestId('experiment-row');
    expect(screen.queryByTestId('signin')).toBeNull();
    expect(f.calls[0].headers.get('Authorization')).toBe(`Bearer ${TOKEN}`);
  });

  it('says clearly when the token is wrong, forgets it and accepts a new one', async () => {
    window.sessionStorage.setItem('lc.token', 'wrong');
    backend();
    renderAt('/');
    await screen.findByTestId('signin');
    const msg = screen.getByTestId('signin-message');
    expect(msg.getAttribute('data-reason')).toBe('rejected');
    expect(msg.textContent).toContain('rejected');
    expect(getToken()).toBeUndefined();
    // Wrong again: still the rejection message.
    fireEvent.change(screen.getByTestId('signin-token'), { target: { value: 'also-wrong' } });
    fireEvent.click(screen.getByTestId('signin-submit'));
    await waitFor(() => expect(screen.getByTestId('signin-message').getAttribute('data-reason')).toBe('rejected'));
    fireEvent.change(screen.getByTestId('signin-token'), { target: { value: TOKEN } });
    fireEvent.click(screen.getByTestId('signin-submit'));
    expect(await screen.findByTestId('experiment-row')).toBeTruthy();
    expect(getToken()).toBe(TOKEN);
  });

  it('Cancel fails the waiting request with a clear 401 message', async () => {
    backend();
    renderAt('/');
    await screen.findByTestId('signin');
    fireEvent.click(screen.getByTestId('signin-cancel'));
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toContain('requires an API token');
    expect(screen.queryByTestId('signin')).toBeNull();
  });

  it('Sign out forgets the token', async () => {
    window.sessionStorage.setItem('lc.token', TOKEN);
    backend();
    renderAt('/');
    await screen.findByTestId('experiment-row');
    fireEvent.click(screen.getByTestId('signout'));
    expect(window.sessionStorage.getItem('lc.token')).toBeNull();
    await waitFor(() => expect(screen.queryByTestId('signout')).toBeNull());
  });

  it('never logs the token', async () => {
    const spies = (['log', 'info', 'warn', 'error', 'debug'] as const).map((m) => vi.spyOn(console, m));
    window.sessionStorage.setItem('lc.token', 'wrong');
    backend();
    renderAt('/');
    fireEvent.change(await screen.findByTestId('signin-token'), { target: { value: TOKEN } });
    fireEvent.click(screen.getByTestId('signin-submit'));
    await screen.findByTestId('experiment-row');
    for (const s of spies) for (const call of s.mock.calls) expect(JSON.stringify(call)).not.toContain(TOKEN);
  });

  it('fetches payloads with the token (a plain link could not send it)', async () => {
    window.sessionStorage.setItem('lc.token', TOKEN);
    stubFetch({ 'GET /api/v1/experiments/demo/records/x/blob': guarded(() => new Response('bytes', { headers: { 'Content-Type': 'text/plain' } })) });
    const { fetchBlob } = await import('./api');
    expect(await (await fetchBlob('demo', 'x')).text()).toBe('bytes');
  });

  it('passes other errors through untouched', async () => {
    stubFetch({ 'GET /api/v1/experiments/demo': () => jsonResponse({ error: { code: 'forbidden', message: 'no' } }, 403) });
    await expect(api.getExperiment('demo')).rejects.toEqual(new ApiError(403, 'forbidden', 'no'));
    expect(screen.queryByTestId('signin')).toBeNull();
  });
});
