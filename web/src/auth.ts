// Bearer-token sign-in for a master started with LC_API_TOKEN.
//
// The token lives in sessionStorage (this tab only, gone when it closes) and is sent as
// `Authorization: Bearer` on every API call. It is never put in a URL or logged. A 401 answer
// opens one sign-in prompt however many requests failed at once; they all wait for it and are
// retried with the token entered. A 401 to a request that carried a token means the token is
// wrong: it is dropped and the prompt says so.

const STORAGE_KEY = 'lc.token';

export type AuthReason = 'required' | 'rejected';

export interface AuthState {
  /** Set while the sign-in prompt is shown. */
  prompt?: { reason: AuthReason };
}

let memoryToken: string | undefined; // fallback when sessionStorage is unavailable
let state: AuthState = {};
const listeners = new Set<() => void>();
let waiters: { resolve: (token: string) => void; reject: (e: unknown) => void }[] = [];

export function getToken(): string | undefined {
  try {
    return window.sessionStorage.getItem(STORAGE_KEY) || undefined;
  } catch {
    return memoryToken;
  }
}

function storeToken(token: string | undefined): void {
  memoryToken = token;
  try {
    if (token) window.sessionStorage.setItem(STORAGE_KEY, token);
    else window.sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // storage unavailable: keep it in memory for this page
  }
}

/** Headers that authenticate a request (empty when no token is known). */
export function authHeaders(): Record<string, string> {
  const t = getToken();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

function emit(next: AuthState): void {
  state = next;
  for (const l of listeners) l();
}

export function subscribeAuth(cb: () => void): () => void {
  listeners.add(cb);
  return () => listeners.delete(cb);
}

export function authSnapshot(): AuthState {
  return state;
}

/**
 * Called on a 401 to a request sent with `sentToken` (undefined: none). Resolves with the token
 * to retry with, once the user has entered one; rejects when the user cancels.
 */
export function requestToken(sentToken: string | undefined): Promise<string> {
  const current = getToken();
  // Another request already got a newer token: retry with it at once.
  if (current && current !== sentToken) return Promise.resolve(current);
  if (sentToken && current === sentToken) storeToken(undefined);
  const reason: AuthReason = sentToken ? 'rejected' : 'required';
  if (!state.prompt || (reason === 'rejected' && state.prompt.reason !== 'rejected')) emit({ prompt: { reason } });
  return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
}

/** The user entered a token: keep it and retry the waiting requests with it. */
export function submitToken(token: string): void {
  const t = token.trim();
  if (!t) return;
  storeToken(t);
  const w = waiters;
  waiters = [];
  emit({});
  for (const x of w) x.resolve(t);
}

/** The user dismissed the prompt: the waiting requests fail with their 401. */
export function cancelSignIn(error: (reason: AuthReason) => unknown): void {
  const reason = state.prompt?.reason ?? 'required';
  const w = waiters;
  waiters = [];
  emit({});
  for (const x of w) x.reject(error(reason));
}

/** Forgets the token (sign out). */
export function signOut(): void {
  storeToken(undefined);
  emit({ ...state });
}

/** Test hook: forget everything. */
export function resetAuth(): void {
  storeToken(undefined);
  waiters = [];
  state = {};
  for (const l of listeners) l();
}
