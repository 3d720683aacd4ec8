import { useState, useSyncExternalStore, type FormEvent } from 'react';
import { ApiError } from '../api';
import { authSnapshot, cancelSignIn, getToken, signOut, submitToken, subscribeAuth } from '../auth';

const MESSAGES = {
  required: 'This server requires an API token (the LC_API_TOKEN it was started with).',
  rejected: 'The server rejected that token. Check it and enter it again.',
};

/** The sign-in prompt, shown while a request waits for a token (see auth.ts). */
export function SignIn() {
  const { prompt } = useSyncExternalStore(subscribeAuth, authSnapshot, authSnapshot);
  const [token, setToken] = useState('');
  if (!prompt) return null;
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    if (!token.trim()) return;
    submitToken(token);
    setToken('');
  };
  const onCancel = () => {
    setToken('');
    cancelSignIn(
      (reason) =>
        new ApiError(401, 'UNAUTHORIZED', reason === 'rejected' ? 'the API token was rejected' : 'this server requires an API token: reload to sign in'),
    );
  };
  return (
    <div className="modal-backdrop">
      <form className="modal" role="dialog" aria-modal="true" aria-labelledby="signin-title" onSubmit={onSubmit} data-testid="signin">
        <h2 id="signin-title">Sign in</h2>
        <p className={prompt.reason === 'rejected' ? 'error-text' : undefined} data-testid="signin-message" data-reason={prompt.reason}>
          {MESSAGES[prompt.reason]}
        </p>
        <label className="stack">
          <span>API token</span>
          <input
            type="password"
            name="token"
            autoComplete="off"
            spellCheck={false}
            autoFocus
            value={token}
            onChange={(e) => setToken(e.target.value)}
            data-testid="signin-token"
          />
        </label>
        <p className="muted small">Kept in this browser tab only (session storage) and sent as a bearer token.</p>
        <div className="filter-actions">
          <button type="submit" className="primary" disabled={!token.trim()} data-testid="signin-submit">
            Sign in
          </button>
          <button type="button" onClick={onCancel} data-testid="signin-cancel">
            Cancel
          </button>
        </div>
      </form>
    </div>
  );
}

/** "Sign out" in the header while a token is kept. */
export function SignOutButton() {
  useSyncExternalStore(subscribeAuth, authSnapshot, authSnapshot); // re-render on sign-in and sign-out
  if (!getToken()) return null;
  return (
    <button type="button" className="link-button" onClick={() => signOut()} data-testid="signout" title="Forget the API token kept for this tab">
      Sign out
    </button>
  );
}
