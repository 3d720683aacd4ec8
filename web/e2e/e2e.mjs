#!/usr/bin/env node
// End-to-end check of the web UI against a running lance-context (dev mode or master + worker).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT=/tmp/ui.png npm run e2e
//
// Env: BASE_URL (required; the master serving the UI and /api/v1, also accepting appends under
// /api/v1/rollouts), SCREENSHOT (PNG path; default ./e2e-screenshot.png), STORE (default
// "e2e-demo"), CHROMIUM (default /usr/bin/chromium), E2E_TIMEOUT_MS (per UI wait, default 15000).
// Prints a JSON summary on stdout; exits 1 when a check fails, 2 on a setup error.
import { chromium } from 'playwright-core';

const BASE_URL = (process.env.BASE_URL ?? '').replace(/\/+$/, '');
const SCREENSHOT = process.env.SCREENSHOT || 'e2e-screenshot.png';
const STORE = process.env.STORE || 'e2e-demo';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT_MS = Number(process.env.E2E_TIMEOUT_MS || 15000);
const MERGE_TIMEOUT_MS = 30000;
const PAGE_SIZE = 25;

const RECORDS = [
  { id: 'e2e-1', rollout_id: 'r1', sequence_order: 0, role: 'user', content: 'hello' },
  { id: 'e2e-2', rollout_id: 'r1', sequence_order: 1, role: 'assistant', content: 'hello, world' },
  { id: 'e2e-3', rollout_id: 'r1', sequence_order: 2, role: 'user', content: 'goodbye' },
];

const started = Date.now();
const checks = [];
const notes = [];
const browserErrors = [];

function check(name, ok, detail = {}) {
  checks.push({ name, ok: Boolean(ok), ...detail });
  process.stderr.write(`${ok ? 'ok  ' : 'FAIL'} ${name}${Object.keys(detail).length ? ` ${JSON.stringify(detail)}` : ''}\n`);
  return ok;
}

function expectEq(name, actual, expected) {
  return check(name, actual === expected, { expected, actual });
}

class SetupError extends Error {}

async function api(method, path, body) {
  let res;
  try {
    res = await fetch(`${BASE_URL}${path}`, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new SetupError(`${method} ${path}: ${e.cause?.message ?? e.message}`);
  }
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

function apiMessage(r) {
  return r.json?.error?.message ?? r.text.slice(0, 300);
}

/** Counts rows of a source through the API (all pages, capped), for stores that existed before. */
async function apiCount(source) {
  let n = 0;
  for (let offset = 0; offset < 10000; offset += 100) {
    const r = await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}/records?source=${source}&limit=100&offset=${offset}`);
    if (r.status !== 200) throw new SetupError(`list ${source}: HTTP ${r.status}: ${apiMessage(r)}`);
    n += r.json.records.length;
    if (!r.json.has_more) break;
  }
  return n;
}

/** Clicks a source tab and returns the number of record rows once the table has settled. */
async function uiCount(page, source) {
  await page.getByTestId(`source-tab-${source}`).click();
  const table = page.locator(`[data-testid="records-table"][data-source="${source}"][data-loading="false"]`);
  await table.waitFor({ state: 'visible', timeout: WAIT_MS });
  // Settled: the same count twice, 300 ms apart, with no request in flight.
  let last = -1;
  for (let i = 0; i < 20; i++) {
    const n = await table.getByTestId('record-row').count();
    if (n === last) return n;
    last = n;
    await page.waitForTimeout(300);
  }
  return last;
}

async function pendingGenerations() {
  const r = await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}?fresh=true`);
  if (r.status !== 200) throw new SetupError(`experiment stats: HTTP ${r.status}: ${apiMessage(r)}`);
  return r.json.pending_generations;
}

async function run() {
  if (!BASE_URL) throw new SetupError('BASE_URL is not set (e.g. BASE_URL=http://127.0.0.1:8080)');

  // 1. Store and data.
  const created = await api('POST', '/api/v1/rollouts', { name: STORE });
  if (created.status !== 201 && created.status !== 409) {
    throw new SetupError(`create store ${STORE}: HTTP ${created.status}: ${apiMessage(created)}`);
  }
  const fresh = created.status === 201;
  if (!fresh) notes.push(`store ${STORE} already existed (409): expected counts are read from the API`);

  const appended = await api('POST', `/api/v1/rollouts/${encodeURIComponent(STORE)}/records?flush=true`, {
    records: RECORDS,
  });
  if (appended.status < 200 || appended.status > 299) {
    throw new SetupError(`append: HTTP ${appended.status}: ${apiMessage(appended)}`);
  }

  const cap = (n) => Math.min(n, PAGE_SIZE);
  const expectBefore = fresh
    ? { fragments: 0, wal: RECORDS.length, all: RECORDS.length }
    : { fragments: cap(await apiCount('fragments')), wal: cap(await apiCount('wal')), all: cap(await apiCount('all')) };

  // 2. Browser.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (e) => browserErrors.push(`pageerror: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error') browserErrors.push(`console: ${m.text()}`);
    });

    try {
      // Experiments list -> search -> the store.
      const res = await page.goto(`${BASE_URL}/`, { waitUntil: 'domcontentloaded' });
      expectEq('UI index served', res?.status(), 200);
      await page.getByTestId('experiments-table').waitFor();
      await page.getByTestId('experiments-search').fill(STORE);
      const link = page.getByTestId('experiments-table').getByRole('link', { name: STORE, exact: true });
      await link.waitFor();
      check('experiments table lists the store', true);
      await link.click();
      await page.getByTestId('experiment-stats').waitFor();
      check('overview shows statistics', true);
      await page.getByTestId('tab-records').click();
      await page.getByTestId('records-table').waitFor();
      check('fragments lag note visible', await page.getByTestId('fragments-note').isVisible());

      // Before the merge.
      for (const s of ['fragments', 'wal', 'all']) {
        expectEq(`before merge: ${s} rows`, await uiCount(page, s), expectBefore[s]);
      }

      // 3. Merge, wait until the WAL tail is folded in.
      const merged = await api('POST', `/api/v1/experiments/${encodeURIComponent(STORE)}/merge`);
      if (merged.status < 200 || merged.status > 299) {
        throw new SetupError(`merge: HTTP ${merged.status}: ${apiMessage(merged)}`);
      }
      const task = merged.json?.task;
      const deadline = Date.now() + MERGE_TIMEOUT_MS;
      let pending = await pendingGenerations();
      while (pending !== 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        pending = await pendingGenerations();
      }
      if (!check('merge drained pending generations', pending === 0, { pending, task_id: task?.id ?? null })) {
        throw new SetupError(`pending_generations still ${pending} after ${MERGE_TIMEOUT_MS / 1000} s`);
      }

      const expectAfter = fresh
        ? { fragments: RECORDS.length, wal: 0, all: RECORDS.length }
        : { fragments: cap(await apiCount('fragments')), wal: 0, all: cap(await apiCount('all')) };

      // After the merge, on a reloaded page.
      await page.reload({ waitUntil: 'domcontentloaded' });
      await page.getByTestId('records-table').waitFor();
      for (const s of ['fragments', 'wal', 'all']) {
        expectEq(`after merge: ${s} rows`, await uiCount(page, s), expectAfter[s]);
      }

      // 4. Expand a record.
      await uiCount(page, 'fragments');
      const row = page.locator('[data-testid="record-row"][data-record-id="e2e-1"]');
      if (!(await row.count())) {
        // On a store with more rows than a page, find it by filter.
        await page.locator('details.filters > summary').click();
        await page.getByTestId('filter-id').fill('e2e-1');
        await page.getByTestId('filter-id').press('Enter');
      }
      await row.click();
      const detail = page.locator('[data-testid="record-detail"][data-record-id="e2e-1"]');
      await detail.waitFor();
      const field = async (f) => ((await detail.locator(`[data-field="${f}"] dd`).textContent()) ?? '').trim();
      expectEq('expanded row: rollout_id field', await field('rollout_id'), 'r1');
      expectEq('expanded row: content field', await field('content'), 'hello');
      check('expanded row: rollout_id visible', await detail.locator('[data-field="rollout_id"]').isVisible());
      check('expanded row: lists every field', (await detail.locator('[data-field]').count()) >= 35, {
        fields: await detail.locator('[data-field]').count(),
      });

      // Other views render.
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      for (const [path, testid] of [
        ['/tasks', 'tasks-table'],
        ['/workers', 'workers-table'],
      ]) {
        await page.goto(`${BASE_URL}${path}`, { waitUntil: 'domcontentloaded' });
        await page.locator(`[data-testid="${testid}"][data-loading="false"]`).waitFor();
        check(`${path} view renders`, (await page.getByRole('alert').count()) === 0);
      }
    } catch (e) {
      await page.screenshot({ path: SCREENSHOT, fullPage: true }).catch(() => {});
      throw e;
    }
  } finally {
    await browser.close();
  }
  check('no uncaught page errors', !browserErrors.some((e) => e.startsWith('pageerror')), {
    errors: browserErrors.filter((e) => e.startsWith('pageerror')),
  });
}

let exitCode = 0;
let error;
try {
  await run();
} catch (e) {
  error = e instanceof SetupError ? e.message : (e?.stack ?? String(e));
  exitCode = e instanceof SetupError ? 2 : 1;
  process.stderr.write(`FAIL ${error}\n`);
}
const failed = checks.filter((c) => !c.ok);
if (failed.length && exitCode === 0) exitCode = 1;
const summary = {
  ok: exitCode === 0,
  base_url: BASE_URL,
  store: STORE,
  screenshot: SCREENSHOT,
  duration_ms: Date.now() - started,
  checks,
  failed: failed.map((c) => c.name),
  error: error ?? null,
  notes,
  browser_errors: browserErrors,
};
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
process.exit(exitCode);
