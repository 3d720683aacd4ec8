#!/usr/bin/env node
// Times the overview's charts against a running lance-context with a large store:
//
//   BASE_URL=http://127.0.0.1:8080 ROWS=1000000 node e2e/charts-timing.mjs
//
// Loads ROWS rollout-shaped records (half assistant turns with reward and num_output_tokens, 20
// policy versions, created_at over 10 hours) into the store STORE (default "charts-timing-<ROWS>";
// skipped when it already holds them), merges, then RUNS times (default 3) per source: the charts
// API alone, and in headless Chromium the overview from navigation until every chart is drawn
// (plus the part of it after the charts answer arrived: the drawing), each time twice: cached (the
// store unchanged since the charts were last computed) and cold (one record appended with
// ?flush=true just before, so the server computes the charts anew: for source all from the cached
// base table and the pending rows, X-Charts-Base cached; fragments charts do not change). Prints JSON.
// Env: LC_API_TOKEN (sent when set), CHROMIUM (default /usr/bin/chromium).
import { chromium } from 'playwright-core';
import { BASE_URL, api, median } from './api.mjs';

const ROWS = Number(process.env.ROWS || 1_000_000);
const STORE = process.env.STORE || `charts-timing-${ROWS}`;
const RUNS = Number(process.env.RUNS || 3);
const TOKEN = process.env.LC_API_TOKEN || '';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

async function load() {
  await api('POST', '/api/v1/rollouts', { name: STORE });
  const have = (await api('GET', `/api/v1/experiments/${STORE}?fresh=true`)).rows;
  if (have >= ROWS) return { loaded: 0, seconds: 0 };
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const started = Date.now();
  const B = 5000;
  const starts = [];
  for (let i = 0; i < ROWS; i += B) starts.push(i);
  const batch = async (from) => {
    const records = [];
    for (let i = from; i < Math.min(ROWS, from + B); i++) {
      const pv = Math.floor((i / ROWS) * 20);
      const assistant = i % 2 === 1;
      records.push({
        id: `ct-${i}`,
        rollout_id: `r-${i >> 1}`,
        sequence_order: i & 1,
        role: assistant ? 'assistant' : 'user',
        content: assistant ? 'x'.repeat(50 + (i % 400)) : `question ${i}`,
        created_at: new Date(t0 + Math.floor((i / ROWS) * 10 * 3600e3)).toISOString(),
        policy_version: String(pv),
        reward: assistant ? Math.min(1, Math.max(0, pv / 20 + ((i * 7919) % 100) / 200 - 0.25)) : null,
        num_output_tokens: assistant ? 20 + (i % 300) : null,
      });
    }
    await api('POST', `/api/v1/rollouts/${STORE}/records`, { records });
  };
  await Promise.all(
    Array.from({ length: 4 }, async (_, k) => {
      for (let j = k; j < starts.length; j += 4) await batch(starts[j]);
    }),
  );
  await api('POST', `/api/v1/rollouts/${STORE}/flush`);
  await api('POST', `/api/v1/experiments/${STORE}/merge`);
  for (let i = 0; i < 300; i++) {
    if ((await api('GET', `/api/v1/experiments/${STORE}?fresh=true`)).pending_generations === 0) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return { loaded: ROWS, seconds: (Date.now() - started) / 1000 };
}

let coldSeq = 0;
// cold makes the server's cached charts stale: one record, sealed into a WAL generation.
async function cold() {
  const i = coldSeq++;
  await api('POST', `/api/v1/rollouts/${STORE}/records?flush=true`, {
    records: [
      {
        id: `ct-cold-${Date.now()}-${i}`,
        rollout_id: `r-cold-${i}`,
        sequence_order: 0,
        role: 'assistant',
        content: 'cold',
        created_at: new Date(Date.parse('2026-01-01T09:59:00Z')).toISOString(),
        policy_version: '19',
        reward: 0.5,
        num_output_tokens: 4,
      },
    ],
  });
}


const loaded = await load();
const out = { base_url: BASE_URL, store: STORE, rows: ROWS, load: loaded, sources: {} };
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu'] });
try {
  // overview times one navigation until every chart is drawn: [total, after the charts answer].
  const overview = async (source) => {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    if (TOKEN) await context.addInitScript((tok) => window.sessionStorage.setItem('lc.token', tok), TOKEN);
    const page = await context.newPage();
    // The overview asks for source=all; route the request to the source measured.
    await page.route('**/charts?source=*', (route) => route.continue({ url: route.request().url().replace(/source=[a-z]+/, `source=${source}`) }));
    let answered = 0;
    let cache = '';
    page.on('response', (r) => {
      if (r.url().includes('/charts?')) {
        answered = performance.now();
        // hit, or miss/<how the base table was read: cached, built, scanned>
        const h = r.headers();
        cache = [h['x-charts-cache'] ?? '', h['x-charts-base'] ?? ''].filter(Boolean).join('/');
      }
    });
    const t = performance.now();
    await page.goto(`${BASE_URL}/experiments/${encodeURIComponent(STORE)}`);
    await page.locator('[data-testid="charts"][data-loading="false"]').waitFor({ timeout: 60000 });
    await page.locator('[data-testid="chart-ingest"] svg.chart').waitFor({ timeout: 60000 });
    const done = performance.now();
    await context.close();
    return { total: done - t, draw: done - answered, cache };
  };
  for (const source of ['fragments', 'all']) {
    const apiMs = [];
    const coldApiMs = [];
    const m = { cached: { page: [], draw: [], cache: [] }, cold: { page: [], draw: [], cache: [] } };
    let rowsScanned;
    for (let i = 0; i < RUNS; i++) {
      await cold();
      let t = performance.now();
      await api('GET', `/api/v1/experiments/${STORE}/charts?source=${source}`);
      coldApiMs.push(performance.now() - t);
      t = performance.now();
      const c = await api('GET', `/api/v1/experiments/${STORE}/charts?source=${source}`);
      apiMs.push(performance.now() - t);
      rowsScanned = c.rows_scanned;
      for (const [kind, before] of [['cached', null], ['cold', cold]]) {
        if (before) await before();
        const r = await overview(source);
        m[kind].page.push(r.total);
        m[kind].draw.push(r.draw);
        m[kind].cache.push(r.cache);
      }
    }
    out.sources[source] = {
      rows_scanned: rowsScanned,
      charts_api_ms_median: Math.round(median(apiMs)),
      charts_api_cold_ms_median: Math.round(median(coldApiMs)),
      overview_until_charts_drawn_ms_median: Math.round(median(m.cached.page)),
      drawing_after_answer_ms_median: Math.round(median(m.cached.draw)),
      cold_overview_until_charts_drawn_ms_median: Math.round(median(m.cold.page)),
      cold_drawing_after_answer_ms_median: Math.round(median(m.cold.draw)),
      overview_ms: m.cached.page.map(Math.round),
      cold_overview_ms: m.cold.page.map(Math.round),
      cache_headers: { cached: m.cached.cache, cold: m.cold.cache },
      runs: RUNS,
    };
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out, null, 2));
