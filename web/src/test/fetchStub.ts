// A stubbed fetch for unit tests: routes by method and path, records every call.
import { vi } from 'vitest';

export interface Call {
  method: string;
  url: URL;
  body?: unknown;
  headers: Headers;
}

export type Handler = (call: Call) => unknown | Response | Promise<unknown | Response>;

export function jsonResponse(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

/**
 * Installs a fetch stub. `routes` maps "METHOD /path" (no query) to a handler returning a body or a Response;
 * a key ending in "/*" matches every path under its prefix.
 */
export function stubFetch(routes: Record<string, Handler>) {
  const calls: Call[] = [];
  const fn = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input), 'http://ui.test');
    const method = (init?.method ?? 'GET').toUpperCase();
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as unknown) : undefined;
    const call: Call = { method, url, body, headers: new Headers(init?.headers) };
    calls.push(call);
    let h = routes[`${method} ${url.pathname}`];
    if (!h) {
      const prefix = Object.keys(routes).find((k) => k.endsWith('/*') && `${method} ${url.pathname}`.startsWith(k.slice(0, -1)));
      if (prefix) h = routes[prefix];
    }
    if (!h) return jsonResponse({ error: { code: 'NOT_FOUND', message: `no stub for ${method} ${url.pathname}` } }, 404);
    const out = await h(call);
    return out instanceof Response ? out : jsonResponse(out);
  });
  vi.stubGlobal('fetch', fn);
  return {
    calls,
    fn,
    /** Calls whose path equals `pathname`. */
    to(pathname: string, method = 'GET'): Call[] {
      return calls.filter((c) => c.url.pathname === pathname && c.method === method);
    },
    last(pathname: string, method = 'GET'): Call | undefined {
      const c = this.to(pathname, method);
      return c[c.length - 1];
    },
  };
}
