// The API client of the timing scripts: BASE_URL and LC_API_TOKEN from the
// environment; a 409 (the store exists) is not an error.
export const BASE_URL = (process.env.BASE_URL ?? '').replace(/\/+$/, '');
const TOKEN = process.env.LC_API_TOKEN || '';
export const auth = TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {};
if (!BASE_URL) {
  console.error('BASE_URL is not set');
  process.exit(2);
}

// call sends one request and returns its parsed JSON body and headers.
export async function call(method, path, body) {
  const r = await fetch(`${BASE_URL}${path}`, {
    method,
    headers: { ...auth, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  if (!r.ok && r.status !== 409) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 300)}`);
  return { body: text ? JSON.parse(text) : undefined, headers: r.headers };
}

// api is call's parsed body alone.
export const api = async (method, path, body) => (await call(method, path, body)).body;

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
