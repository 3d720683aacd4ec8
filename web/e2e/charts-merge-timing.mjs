#!/usr/bin/env node
// Times the charts API after a merge into a large store (load it first with charts-timing.mjs):
//
//   BASE_URL=http://127.0.0.1:8080 STORE=charts-timing-1000000 ADD=5000 RUNS=3 node e2e/charts-merge-timing.mjs
//
// Each run appends ADD new records (?flush=true), merges them into the base table, waits until no
// generation is pending, then times GET /charts?source=all twice: the first computes the charts
// for the new base table version (X-Charts-Base: built when the server scans the base table into a
// new chart base, updated when it follows the merge from the previous one), the second is served
// from the answer cache or the chart base as it stands. The first request of all (before the
// runs) is reported too: after a restart of the server it builds the chart base. Prints JSON.
// Env: LC_API_TOKEN (sent when set); REPLACE_FROM=N makes the records rewrite ids ct-N... of the
// loaded store instead of adding new ones (the merge then deletes the rows they replace).
import { BASE_URL, call as api, median } from './api.mjs';

const STORE = process.env.STORE || 'charts-timing-1000000';
const ADD = Number(process.env.ADD || 5000);
const RUNS = Number(process.env.RUNS || 3);
const REPLACE_FROM = process.env.REPLACE_FROM === undefined ? -1 : Number(process.env.REPLACE_FROM);

async function charts() {
  const t = performance.now();
  const r = await api('GET', `/api/v1/experiments/${STORE}/charts?source=all`);
  return { ms: performance.now() - t, base: r.headers.get('x-charts-base') ?? '', rows_scanned: r.body.rows_scanned };
}

const t0 = Date.parse('2026-01-01T10:00:00Z');
const stamp = Date.now();
const cold = [];
const warm = [];
const first = await charts(); // the chart base of the current version (built after a restart)
for (let run = 0; run < RUNS; run++) {
  const records = [];
  for (let i = 0; i < ADD; i++) {
    const assistant = i % 2 === 1;
    records.push({
      id: REPLACE_FROM >= 0 ? `ct-${REPLACE_FROM + run * ADD + i}` : `cm-${stamp}-${run}-${i}`,
      rollout_id: `rm-${stamp}-${run}-${i >> 1}`,
      sequence_order: i & 1,
      role: assistant ? 'assistant' : 'user',
      content: assistant ? 'x'.repeat(50 + (i % 400)) : `question ${i}`,
      created_at: new Date(t0 + run * 60e3 + i).toISOString(),
      policy_version: '20',
      reward: assistant ? ((i * 7919) % 100) / 100 : null,
      num_output_tokens: assistant ? 20 + (i % 300) : null,
    });
  }
  await api('POST', `/api/v1/rollouts/${STORE}/records?flush=true`, { records });
  await api('POST', `/api/v1/rollouts/${STORE}/merge`);
  for (let i = 0; i < 300; i++) {
    if ((await api('GET', `/api/v1/experiments/${STORE}?fresh=true`)).body.pending_generations === 0) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  cold.push(await charts());
  warm.push(await charts());
}
console.log(
  JSON.stringify(
    {
      base_url: BASE_URL,
      store: STORE,
      added_per_run: ADD,
      replacing: REPLACE_FROM >= 0,
      first: { ms: Math.round(first.ms), base: first.base },
      after_merge_ms_median: Math.round(median(cold.map((c) => c.ms))),
      cached_ms_median: Math.round(median(warm.map((c) => c.ms))),
      after_merge: cold.map((c) => ({ ms: Math.round(c.ms), base: c.base, rows_scanned: c.rows_scanned })),
      cached: warm.map((c) => ({ ms: Math.round(c.ms), base: c.base })),
    },
    null,
    2,
  ),
);
