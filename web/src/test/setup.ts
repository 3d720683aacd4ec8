import { cleanup } from '@testing-library/react';
import { afterEach, vi } from 'vitest';
import { resetAuth } from '../auth';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  window.history.replaceState(null, '', '/');
  window.localStorage.clear();
  window.sessionStorage.clear();
  resetAuth();
});
