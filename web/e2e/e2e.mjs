#!/usr/bin/env node
// End-to-end check of the web UI against a running lance-context (dev mode or master + worker).
//
//   BASE_URL=http://127.0.0.1:8080 SCREENSHOT=/tmp/ui.png npm run e2e
//
// Env: BASE_URL (required; the master serving the UI and /api/v1, also accepting appends under
// /api/v1/rollouts), SCREENSHOT (PNG path; default ./e2e-screenshot.png; the other screenshots
// are saved beside it, named PREFIX + what they show), PREFIX (file name prefix of those, default
// ""), STORE (default "e2e-demo"), LC_API_TOKEN (the server's token when it runs with auth: the
// browser must then sign in; unset: the browser must never be asked), CHROMIUM (default
// /usr/bin/chromium), E2E_TIMEOUT_MS (per UI wait, default 15000).
// Prints a JSON summary on stdout; exits 1 when a check fails, 2 on a setup error.
import { dirname, join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const BASE_URL = (process.env.BASE_URL ?? '').replace(/\/+$/, '');
const SCREENSHOT = process.env.SCREENSHOT || 'e2e-screenshot.png';
const STORE = process.env.STORE || 'e2e-demo';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const WAIT_MS = Number(process.env.E2E_TIMEOUT_MS || 15000);
const MERGE_TIMEOUT_MS = 30000;
const PAGE_SIZE = 25;
const TOKEN = process.env.LC_API_TOKEN || '';
const PREFIX = process.env.PREFIX || '';
const ARTIFACTS = dirname(SCREENSHOT);
const EMPTY_STORE = `${STORE}-empty`;
const shots = [];

/** Saves a full-page screenshot named PREFIX + name beside SCREENSHOT. */
async function shot(page, name) {
  const path = join(ARTIFACTS, `${PREFIX}${name}.png`);
  await page.screenshot({ path, fullPage: true });
  shots.push(path);
}

// Written in reverse sequence order: the conversation view must sort them.
const RECORDS = [
  { id: 'e2e-1', rollout_id: 'r1', sequence_order: 0, role: 'user', content: 'hello', policy_version: '1' },
  {
    id: 'e2e-2', rollout_id: 'r1', sequence_order: 1, role: 'assistant', content: 'hello, world',
    reward: 1, policy_version: '1', num_input_tokens: 4, num_output_tokens: 3,
  },
  { id: 'e2e-3', rollout_id: 'r1', sequence_order: 2, role: 'user', content: 'goodbye', reward: 0.25, policy_version: '2' },
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
      headers: {
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        ...(TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {}),
      },
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

/** Record ids of the first page of a source: as the table shows them, and as the API lists them. */
async function sameOrder(page, source, label) {
  const ui = await page
    .locator(`[data-testid="records-table"][data-source="${source}"] [data-testid="record-row"]`)
    .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-record-id')));
  const r = await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}/records?source=${source}&limit=${PAGE_SIZE}`);
  if (r.status !== 200) throw new SetupError(`list ${source}: HTTP ${r.status}: ${apiMessage(r)}`);
  const want = r.json.records.map((x) => x.id);
  check(`${label}: ${source} rows in the API's order`, JSON.stringify(ui) === JSON.stringify(want), { ui, api: want });
}

async function pendingGenerations() {
  const r = await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}?fresh=true`);
  if (r.status !== 200) throw new SetupError(`experiment stats: HTTP ${r.status}: ${apiMessage(r)}`);
  return r.json.pending_generations;
}

/** Answers the sign-in prompt (auth on): optionally a wrong token first, which must be rejected. */
async function signIn(page, { wrongFirst = false, shots: save = false } = {}) {
  const prompt = page.getByTestId('signin');
  await prompt.waitFor();
  check('auth on: sign-in prompt shown', true);
  expectEq('sign-in: asks for the token', await page.getByTestId('signin-message').getAttribute('data-reason'), 'required');
  if (save) await shot(page, 'signin');
  if (wrongFirst) {
    await page.getByTestId('signin-token').fill(`${TOKEN}-wrong`);
    await page.getByTestId('signin-submit').click();
    await page.locator('[data-testid="signin-message"][data-reason="rejected"]').waitFor();
    check('sign-in: a wrong token is reported as rejected', /rejected/.test((await page.getByTestId('signin-message').textContent()) ?? ''));
    if (save) await shot(page, 'signin-rejected');
  }
  await page.getByTestId('signin-token').fill(TOKEN);
  await page.getByTestId('signin-submit').click();
  await prompt.waitFor({ state: 'detached' });
  check('sign-in: the right token is accepted', true);
  check('sign-in: token not in the address bar', !page.url().includes(TOKEN));
}

const storeHref = (name) => `/experiments/${encodeURIComponent(name)}`;

function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

/** A w x h RGB PNG with a gradient, so the preview has something to show. */
function png(w, h) {
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, 'ascii');
    data.copy(out, 8);
    out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) raw.set([Math.round((255 * x) / w), Math.round((255 * y) / h), 160], y * (1 + 3 * w) + 1 + 3 * x);
  }
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

/** Appends rollout r2 (an image turn and a text-payload turn) through the multipart append route. */
async function appendPayloadRollout() {
  const form = new FormData();
  const records = [
    { id: 'e2e-p1', rollout_id: 'r2', sequence_order: 0, role: 'user', content: 'What is in this picture?', content_type: 'image/png' },
    { id: 'e2e-p2', rollout_id: 'r2', sequence_order: 1, role: 'assistant', content: 'A gradient.', content_type: 'text/plain', reward: 0.5 },
  ];
  form.append('metadata', new Blob([JSON.stringify({ records })], { type: 'application/json' }));
  form.append('0', new Blob([png(96, 64)], { type: 'image/png' }));
  form.append('1', new Blob(['the text payload of e2e-p2'], { type: 'text/plain' }));
  let res;
  try {
    res = await fetch(`${BASE_URL}/api/v1/rollouts/${encodeURIComponent(STORE)}/records?flush=true`, {
      method: 'POST',
      headers: TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {},
      body: form,
    });
  } catch (e) {
    throw new SetupError(`append with payloads: ${e.message}`);
  }
  if (!res.ok) throw new SetupError(`append with payloads: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
}

/** The rollout of a record as a conversation, by the record's link and by a shared URL. */
async function checkConversation(page, browser) {
  await page.getByTestId('open-rollout').first().click();
  const convo = page.getByTestId('conversation');
  await convo.waitFor();
  expectEq('conversation: URL is the rollout route', new URL(page.url()).pathname, `${storeHref(STORE)}/rollouts/r1`);
  const ids = await convo.getByTestId('turn').evaluateAll((els) => els.map((e) => e.getAttribute('data-record-id')));
  const ours = ids.filter((id) => id && id.startsWith('e2e-'));
  check('conversation: turns in sequence_order', JSON.stringify(ours) === JSON.stringify(['e2e-1', 'e2e-2', 'e2e-3']), { ids: ours });
  const second = convo.locator('[data-testid="turn"][data-record-id="e2e-2"]');
  expectEq('conversation: role shown', await second.getAttribute('data-role'), 'assistant');
  const text = (await second.textContent()) ?? '';
  check('conversation: per-turn reward and tokens shown', text.includes('reward 1') && text.includes('4 in / 3 out'), { text });
  await shot(page, 'conversation');

  // The link, opened by someone else (a new browser context: no session, so with auth a new sign-in).
  const other = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  try {
    const p2 = await other.newPage();
    p2.setDefaultTimeout(WAIT_MS);
    p2.on('pageerror', (e) => browserErrors.push(`pageerror: ${e.message}`));
    await p2.goto(page.url(), { waitUntil: 'domcontentloaded' });
    if (TOKEN) await signIn(p2);
    await p2.getByTestId('conversation').waitFor();
    const n = await p2.getByTestId('turn').count();
    check('conversation: the shared link opens the same conversation', n === ids.length, { turns: n, expected: ids.length });
  } finally {
    await other.close();
  }

  // Payload previews: an image and a text, fetched through the blob route (with the token when on).
  await appendPayloadRollout();
  await page.goto(`${BASE_URL}${storeHref(STORE)}/rollouts/r2`, { waitUntil: 'domcontentloaded' });
  const img = page.locator('[data-testid="turn"][data-record-id="e2e-p1"] [data-testid="payload-preview"][data-kind="image"] img');
  await img.waitFor();
  const size = await img.evaluate(async (el) => {
    if (!el.complete) await new Promise((r) => el.addEventListener('load', r, { once: true }));
    return [el.naturalWidth, el.naturalHeight];
  });
  check('conversation: image payload decoded in the page', size[0] === 96 && size[1] === 64, { size });
  const textPreview = page.locator('[data-testid="turn"][data-record-id="e2e-p2"] [data-testid="payload-preview"][data-kind="text"]');
  await textPreview.waitFor();
  check('conversation: text payload previewed', ((await textPreview.textContent()) ?? '').includes('the text payload of e2e-p2'));
  await shot(page, 'conversation-payload');

  // All with both tiers (the new rows are still in the WAL, the first three merged): the page shows
  // the rows in the order the API lists them.
  await page.goto(`${BASE_URL}${storeHref(STORE)}/records?source=all`, { waitUntil: 'domcontentloaded' });
  await page.locator('[data-testid="records-table"][data-source="all"][data-loading="false"]').waitFor();
  await sameOrder(page, 'all', 'WAL and base');
}

const CHART_CARDS = ['chart-reward-version', 'chart-reward-time', 'chart-length-hist', 'chart-length-time', 'chart-ingest'];

async function chartsSettled(page) {
  await page.locator('[data-testid="charts"][data-loading="false"]').waitFor();
  const err = page.getByTestId('charts').getByRole('alert');
  if (await err.count()) return (await err.first().textContent()) ?? 'error';
  // The drawing code is a chunk of its own: wait until it has drawn (the backlog card is always there).
  await page.getByTestId('chart-pending').waitFor();
  return '';
}

/** The overview's charts: drawn for the store with data, "no data yet" for the empty store. */
async function checkCharts(page) {
  await page.goto(`${BASE_URL}${storeHref(STORE)}`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('experiment-stats').waitFor();
  expectEq('charts: no error', await chartsSettled(page), '');
  for (const id of CHART_CARDS) {
    const card = page.getByTestId(id);
    const drawn = await card.locator('svg.chart').count();
    const pts = drawn ? Number(await card.locator('svg.chart').getAttribute('data-points')) : 0;
    check(`charts: ${id} drawn`, drawn === 1 && pts >= 1, { points: pts });
  }
  const dots = await page.getByTestId('chart-reward-version').getByTestId('chart-dot').count();
  check('charts: reward by policy_version has a point per version', dots >= 2, { dots });
  const svg = page.getByTestId('chart-reward-version').locator('svg.chart');
  const box = (await svg.count()) ? await svg.boundingBox() : null;
  check('charts: reward chart is visible at a readable size', Boolean(box && box.width >= 300 && box.height >= 100), { box });
  check('charts: backlog shown', await page.getByTestId('backlog').isVisible());
  await shot(page, 'charts');

  await page.goto(`${BASE_URL}${storeHref(EMPTY_STORE)}`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('experiment-stats').waitFor();
  expectEq('charts (empty store): no error', await chartsSettled(page), '');
  for (const id of CHART_CARDS) {
    const empty = await page.getByTestId(id).getByTestId('chart-empty').count();
    check(`charts (empty store): ${id} says no data yet`, empty === 1);
  }
  expectEq('charts (empty store): backlog 0 rows', (await page.getByTestId('backlog-rows').textContent())?.trim(), '0');
  await shot(page, 'charts-empty');
  await page.getByTestId('tab-records').click();
  const empty = page.getByTestId('records-empty');
  await empty.waitFor();
  check('records (empty store): Fragments tab says the store is empty', /No (records|merged records)/.test((await empty.textContent()) ?? ''));
}

/** The overview's storage panel: the dev worker's WAL and seal metrics, read by the master from its /metrics. */
async function checkStorage(page) {
  await page.goto(`${BASE_URL}${storeHref(STORE)}`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('experiment-stats').waitFor();
  await chartsSettled(page); // the screenshot shows the whole overview
  const row = page.getByTestId('storage-table').getByTestId('storage-row').first();
  await row.waitFor();
  const text = (await row.textContent()) ?? '';
  check('storage: the worker answers', !text.includes('unreachable'), { row: text });
  check('storage: the worker that wrote the store is marked', text.includes('this store'), { row: text });
  // The test appended with flush: at least one seal, caused by a flush.
  check('storage: seals by cause', /[1-9][\d,]* \(.*flush [1-9]/.test(text), { row: text });
  check('storage: no endpoint error', (await page.getByTestId('storage-error').count()) === 0);
  await page.getByTestId('storage-panel').scrollIntoViewIfNeeded();
  await shot(page, 'storage');

  await page.goto(`${BASE_URL}${storeHref(EMPTY_STORE)}`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('experiment-stats').waitFor();
  await page.getByTestId('storage-table').getByTestId('storage-row').first().waitFor();
  const emptyText = (await page.getByTestId('storage-table').textContent()) ?? '';
  check('storage (empty store): no worker marked as writing it', !emptyText.includes('this store'), { table: emptyText });
  check('storage (empty store): no endpoint error', (await page.getByTestId('storage-error').count()) === 0);
}

/** The expected task-result text of a cleanup, from the API's result (zero counts are left out there). */
function cleanupSummaryPattern(result) {
  const versions = result?.versions_removed ?? 0;
  const files = result?.files_removed ?? 0;
  const bytes = result?.bytes_removed ?? 0;
  if (!versions && !files && !bytes) return /^nothing to remove$/;
  return new RegExp(`^removed ${versions.toLocaleString('en-US')} versions?, ${files.toLocaleString('en-US')} files?; [\\d.]+ (B|KiB|MiB|GiB|TiB) reclaimed$`);
}

/**
 * Lifecycle: the base lag on the experiments list and the overview (a store with a pending generation
 * against the merged and the empty one), the Cleanup button followed to its result (and the same task
 * in the tasks view), and a tag created through the worker route listed on the overview.
 */
async function checkLifecycle(page) {
  const LAG_STORE = `${STORE}-lag`;
  const created = await api('POST', '/api/v1/rollouts', { name: LAG_STORE });
  if (created.status !== 201 && created.status !== 409) throw new SetupError(`create store ${LAG_STORE}: HTTP ${created.status}: ${apiMessage(created)}`);
  const appended = await api('POST', `/api/v1/rollouts/${encodeURIComponent(LAG_STORE)}/records?flush=true`, {
    records: [{ id: 'lag-1', rollout_id: 'lag', content: 'waits in the WAL' }],
  });
  if (appended.status < 200 || appended.status > 299) throw new SetupError(`append to ${LAG_STORE}: HTTP ${appended.status}: ${apiMessage(appended)}`);
  // Read now, so the master's cached statistics (what the list serves) hold the pending generation.
  const stats = await api('GET', `/api/v1/experiments/${encodeURIComponent(LAG_STORE)}?fresh=true`);
  if (stats.status !== 200) throw new SetupError(`stats of ${LAG_STORE}: HTTP ${stats.status}: ${apiMessage(stats)}`);
  check('lag: the API reports a merge lag for a pending generation', stats.json.pending_generations > 0 && stats.json.merge_lag_seconds > 0, {
    pending_generations: stats.json.pending_generations,
    merge_lag_seconds: stats.json.merge_lag_seconds,
  });
  const emptyStats = await api('GET', `/api/v1/experiments/${encodeURIComponent(EMPTY_STORE)}?fresh=true`);
  expectEq('lag: the API reports no lag for the empty store', emptyStats.json?.merge_lag_seconds, 0);

  // The list: the Base lag column.
  await page.goto(`${BASE_URL}/?search=${encodeURIComponent(STORE)}`, { waitUntil: 'domcontentloaded' });
  const table = page.getByTestId('experiments-table');
  const header = table.locator('th', { hasText: 'Base lag' });
  check('lag: the experiments list has a Base lag column', (await header.count()) === 1);
  const lagCell = (name) =>
    table.getByTestId('experiment-row').filter({ has: page.getByRole('link', { name, exact: true }) }).getByTestId('merge-lag');
  await lagCell(LAG_STORE).waitFor();
  // A background refresh may run between the API read and the page's: allow for a few seconds.
  let shown = '';
  let shownSeconds = 0;
  for (let i = 0; i < 20; i++) {
    shown = ((await lagCell(LAG_STORE).textContent()) ?? '').trim();
    shownSeconds = Number(await lagCell(LAG_STORE).getAttribute('data-lag-seconds'));
    if (shown !== '—') break;
    await page.waitForTimeout(500);
  }
  check('lag: the store with a pending generation shows its lag', /^(<1s|\d+s|\d+m \d+s)$/.test(shown) && shownSeconds > 0, { shown, seconds: shownSeconds });
  check('lag: the lag shown is the API figure (within the page refresh)', shownSeconds >= stats.json.merge_lag_seconds - 1 && shownSeconds < stats.json.merge_lag_seconds + 30, {
    page: shownSeconds,
    api: stats.json.merge_lag_seconds,
  });
  // The scheduler merges a generation older than 60 s: this one is seconds old, so not highlighted.
  expectEq('lag: a lag under 60 s is not highlighted', await lagCell(LAG_STORE).getAttribute('data-warn'), 'false');
  expectEq('lag: the empty store shows a dash', ((await lagCell(EMPTY_STORE).textContent()) ?? '').trim(), '—');
  await shot(page, 'lifecycle-list');

  // The overview of the lagging store: the statistic and its shard's lag.
  await page.goto(`${BASE_URL}${storeHref(LAG_STORE)}`, { waitUntil: 'domcontentloaded' });
  const statLag = page.getByTestId('experiment-stats').getByTestId('merge-lag');
  await statLag.waitFor();
  const statText = ((await statLag.textContent()) ?? '').trim();
  check('lag: the overview shows the base lag', statText !== '—' && Number(await statLag.getAttribute('data-lag-seconds')) > 0, { shown: statText });
  const shardLag = page.getByTestId('shards-table').getByTestId('merge-lag').first();
  check('lag: the shard table shows the shard lag', ((await shardLag.textContent()) ?? '—').trim() !== '—', {
    shown: await shardLag.textContent(),
  });

  // A tag through the worker route (dev mode serves it beside the master): listed on the overview.
  const version = (await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}?fresh=true`)).json?.version;
  const tag = await api('POST', `/api/v1/rollouts/${encodeURIComponent(STORE)}/tags`, { name: 'e2e-tag', version });
  if (tag.status !== 201 && tag.status !== 200 && tag.status !== 409) throw new SetupError(`create tag: HTTP ${tag.status}: ${apiMessage(tag)}`);
  const listed = (await api('GET', `/api/v1/rollouts/${encodeURIComponent(STORE)}/tags`)).json?.tags ?? [];
  const want = listed.find((t) => t.name === 'e2e-tag');

  // The Cleanup button on the merged store, beside Merge and Compact, followed until the task is done.
  await page.goto(`${BASE_URL}${storeHref(STORE)}`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('experiment-stats').waitFor();
  const tagRow = page.getByTestId('tags-table').getByTestId('tag-row').filter({ hasText: 'e2e-tag' });
  await tagRow.waitFor();
  const cells = await tagRow.locator('td').allTextContents();
  check('tags: the tag created through the worker route is listed with its version', cells[0] === 'e2e-tag' && cells[1] === String(want?.version), {
    row: cells,
    api: want ?? null,
  });
  const button = page.getByTestId('cleanup-button');
  expectEq('cleanup: the button sits beside Merge and Compact', await button.evaluate((b) => b.parentElement?.querySelector('[data-testid="merge-button"]') !== null), true);
  await button.click();
  const inline = page.getByTestId('action-task');
  await inline.waitFor();
  const taskId = ((await inline.locator('.mono').first().textContent()) ?? '').trim();
  check('cleanup: the button enqueued a cleanup task', /cleanup task/.test((await inline.textContent()) ?? '') && taskId !== '', { text: await inline.textContent() });
  await page.locator('[data-testid="action-task"] .badge-done, [data-testid="action-task"] .badge-failed').waitFor({ timeout: MERGE_TIMEOUT_MS });
  const t = await api('GET', `/api/v1/tasks/${encodeURIComponent(taskId)}`);
  expectEq('cleanup: the task finished', t.json?.state, 'done');
  if (t.json?.error) notes.push(`cleanup task error: ${t.json.error}`);
  const resultText = ((await page.getByTestId('action-task-result').textContent().catch(() => '')) ?? '').trim();
  const pattern = cleanupSummaryPattern(t.json?.result);
  check('cleanup: the overview shows what the task reclaimed', pattern.test(resultText), { shown: resultText, result: t.json?.result ?? null });
  await shot(page, 'lifecycle-overview');

  // The same task in the tasks view, with its result.
  await page.goto(`${BASE_URL}/tasks`, { waitUntil: 'domcontentloaded' });
  await page.locator('[data-testid="tasks-table"][data-loading="false"]').waitFor();
  const row = page.locator(`[data-testid="task-row"][data-task-id="${taskId}"]`);
  await row.waitFor();
  const rowText = (await row.textContent()) ?? '';
  const rowResult = ((await row.getByTestId('task-result').textContent()) ?? '').trim();
  check('cleanup: the tasks view lists the cleanup task with its result', rowText.includes('cleanup') && pattern.test(rowResult), { result: rowResult });
  await row.scrollIntoViewIfNeeded();
  await shot(page, 'lifecycle-tasks');
}

/** The SQL console: a GROUP BY matched against a scan through the records API, and a refused escape. */
async function checkSql(page) {
  // Expected from the records API (source all): mean reward and count by policy_version.
  const want = new Map();
  for (let offset = 0; offset < 10000; offset += 100) {
    const r = await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}/records?source=all&limit=100&offset=${offset}`);
    if (r.status !== 200) throw new SetupError(`list all: HTTP ${r.status}: ${apiMessage(r)}`);
    for (const rec of r.json.records) {
      if (rec.reward === null || rec.reward === undefined || rec.policy_version == null) continue;
      const e = want.get(rec.policy_version) ?? { sum: 0, n: 0 };
      e.sum += rec.reward;
      e.n += 1;
      want.set(rec.policy_version, e);
    }
    if (!r.json.has_more) break;
  }

  await page.goto(`${BASE_URL}${storeHref(STORE)}/sql`, { waitUntil: 'domcontentloaded' });
  const input = page.getByTestId('sql-input');
  await input.waitFor();
  await page.getByTestId('sql-source').selectOption('all');
  await input.fill(
    'SELECT policy_version, avg(reward) AS mean_reward, count(*) AS n\nFROM records\nWHERE reward IS NOT NULL AND policy_version IS NOT NULL\nGROUP BY 1\nORDER BY 1',
  );
  await input.press('Control+Enter');
  const table = page.getByTestId('sql-results');
  await Promise.race([table.waitFor(), page.getByTestId('sql-error').getByRole('alert').waitFor()]);
  const err = await page.getByTestId('sql-error').textContent();
  expectEq('sql: GROUP BY runs without error', err ?? '', '');
  if (await table.count()) {
    const rows = await table.getByTestId('sql-row').evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
    );
    const got = rows.map(([v, mean, n]) => [v, Number(mean), Number(n.replace(/,/g, ''))]);
    const expected = [...want.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([v, e]) => [v, e.sum / e.n, e.n]);
    const same =
      got.length === expected.length &&
      got.every((g, i) => g[0] === expected[i][0] && Math.abs(g[1] - expected[i][1]) < 1e-4 && g[2] === expected[i][2]);
    check('sql: result matches a scan through the records API', same, { got, expected });
    const meta = (await page.getByTestId('sql-meta').textContent()) ?? '';
    check('sql: rows scanned and elapsed time shown', /rows scanned/.test(meta) && /ms/.test(meta), { meta });
  }
  await shot(page, 'sql-console');

  await input.fill("SELECT * FROM read_csv('/etc/passwd')");
  await page.getByTestId('sql-run').click();
  const alert = page.getByTestId('sql-error').getByRole('alert');
  await alert.waitFor();
  const msg = ((await alert.textContent()) ?? '').trim();
  check('sql: a file read is refused with the server message', msg.length > 0 && !/root:/.test(msg), { message: msg });
  await shot(page, 'sql-error');
}

/** The store of the run comparison: two policy versions with other rewards than STORE's. */
const COMPARE_STORE = `${STORE}-b`;

/** The reference's operations surface: list columns, Optimize (merge → compact → index with
 * depends_on) and its tasks with durations, a task page, Index, the global SQL page, a record deep
 * link, the run comparison, tool-call JSON and logprobs in a conversation, and a 420 px screen. */
async function checkOperations(page) {
  // Data for the comparison and the conversation.
  const made = await api('POST', '/api/v1/rollouts', { name: COMPARE_STORE });
  if (made.status !== 201 && made.status !== 409) throw new SetupError(`create store ${COMPARE_STORE}: HTTP ${made.status}: ${apiMessage(made)}`);
  const cmp = await api('POST', `/api/v1/rollouts/${encodeURIComponent(COMPARE_STORE)}/records?flush=true`, {
    records: [
      { id: 'b-1', rollout_id: 'rb1', role: 'assistant', content: 'a', reward: 0.5, policy_version: '1' },
      { id: 'b-2', rollout_id: 'rb2', role: 'assistant', content: 'b', reward: 0.75, policy_version: '2' },
      { id: 'b-3', rollout_id: 'rb3', role: 'assistant', content: 'c', reward: 0.9, policy_version: '10' },
    ],
  });
  if (cmp.status < 200 || cmp.status > 299) throw new SetupError(`append ${COMPARE_STORE}: HTTP ${cmp.status}: ${apiMessage(cmp)}`);
  const call = { name: 'search', arguments: JSON.stringify({ query: 'lance format', k: 3 }) };
  const tool = await api('POST', `/api/v1/rollouts/${encodeURIComponent(STORE)}/records?flush=true`, {
    records: [
      { id: 'e2e-tool-0', rollout_id: 'r-tool', sequence_order: 0, role: 'user', content: 'Find the Lance format spec.' },
      {
        id: 'e2e-tool-1', rollout_id: 'r-tool', sequence_order: 1, role: 'assistant', content: JSON.stringify(call),
        output_tokens: [101, 102, 103, 104], output_logprobs: [-0.01, -0.2, -1.5, -3.2], policy_version: '2',
      },
      { id: 'e2e-tool-2', rollout_id: 'r-tool', sequence_order: 2, role: 'tool', content: '<tool_response>{"hits":[{"title":"Lance v2 format","score":0.92}]}</tool_response>' },
    ],
  });
  if (tool.status < 200 || tool.status > 299) throw new SetupError(`append tool rollout: HTTP ${tool.status}: ${apiMessage(tool)}`);

  // The list: the reference's columns.
  await page.goto(`${BASE_URL}/?search=${encodeURIComponent(STORE)}`, { waitUntil: 'domcontentloaded' });
  const table = page.locator('[data-testid="experiments-table"][data-loading="false"]');
  await table.waitFor();
  const heads = (await table.locator('thead th').allTextContents()).map((s) => s.trim());
  check('ops: the list has Rows, Fragments, Pending WAL gens and Compacted columns', ['Rows', 'Fragments', 'Pending WAL gens', 'Compacted'].every((h) => heads.includes(h)), { heads });
  const rowOf = (name) => page.getByTestId('experiment-row').filter({ has: page.getByRole('link', { name, exact: true }) });
  await rowOf(STORE).waitFor();
  const exp = (await api('GET', `/api/v1/experiments/${encodeURIComponent(STORE)}`)).json ?? {};
  const compactedText = ((await rowOf(STORE).getByTestId('experiment-compacted').textContent()) ?? '').trim();
  check('ops: Compacted shows what the server says', typeof exp.compacted === 'boolean' ? compactedText.startsWith(exp.compacted ? 'yes' : 'no') : compactedText !== '', {
    shown: compactedText,
    compacted: exp.compacted ?? null,
    fragment_count: exp.fragment_count ?? null,
  });
  await shot(page, 'ops-experiments');

  // Index from the list.
  await rowOf(COMPARE_STORE).getByTestId('index-button').click();
  const indexLink = rowOf(COMPARE_STORE).getByTestId('index-task');
  await indexLink.waitFor();
  check('ops: Index enqueued an index task', /^\/tasks\/.+/.test((await indexLink.getAttribute('href')) ?? ''), { href: await indexLink.getAttribute('href') });

  // Optimize: three tasks, each after the one before, then the tasks view.
  await rowOf(STORE).getByTestId('optimize-button').click();
  await page.waitForURL((u) => u.pathname === '/tasks', { timeout: WAIT_MS });
  const ids = (new URL(page.url()).searchParams.get('ids') ?? '').split(',').filter(Boolean);
  expectEq('ops: Optimize enqueued three tasks and opened the tasks', ids.length, 3);
  const tasks = [];
  for (const id of ids) tasks.push((await api('GET', `/api/v1/tasks/${encodeURIComponent(id)}`)).json ?? {});
  const deps = (t) => (Array.isArray(t.depends_on) ? t.depends_on : t.depends_on ? [t.depends_on] : []);
  check('ops: merge, then compact after it, then index after that', tasks.map((t) => t.kind).join(',') === 'merge,compact,index' && deps(tasks[1]).includes(ids[0]) && deps(tasks[2]).includes(ids[1]), {
    tasks: tasks.map((t) => ({ id: t.id, kind: t.kind, depends_on: t.depends_on ?? null, state: t.state })),
  });
  // Follow them to the end (the scheduler runs them in order).
  const deadline = Date.now() + 3 * MERGE_TIMEOUT_MS;
  let states = [];
  while (Date.now() < deadline) {
    states = [];
    for (const id of ids) states.push((await api('GET', `/api/v1/tasks/${encodeURIComponent(id)}`)).json?.state);
    if (states.every((s) => s === 'done' || s === 'failed')) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  expectEq('ops: the three tasks finished', states.join(','), 'done,done,done');
  await page.reload({ waitUntil: 'domcontentloaded' });
  await page.locator('[data-testid="tasks-table"][data-loading="false"]').waitFor();
  const picked = page.locator('[data-testid="task-row"].picked');
  await picked.first().waitFor();
  expectEq('ops: the chain is highlighted in the tasks view', await picked.count(), 3);
  const durations = [];
  for (const id of ids) durations.push(((await page.locator(`[data-testid="task-row"][data-task-id="${id}"] [data-testid="task-duration"]`).textContent()) ?? '').trim());
  check('ops: each finished task shows its duration', durations.every((d) => /^\d+(\.\d+)? (ms|s)$|^\d+m \d+s$/.test(d)), { durations });
  await shot(page, 'ops-tasks');

  // The compact task's page: its dependency, times and result.
  await page.locator(`[data-testid="task-row"][data-task-id="${ids[1]}"] [data-testid="task-link"]`).click();
  await page.getByTestId('task-detail').waitFor();
  await page.getByTestId('task-state').locator('.badge').waitFor();
  const detailText = (await page.getByTestId('task-detail').textContent()) ?? '';
  check('ops: the task page shows the kind, its dependency and its result', detailText.includes('compact') && detailText.includes(ids[0].slice(-8)) && (await page.getByTestId('task-detail-result').locator('pre').count()) === 1, {
    url: page.url(),
  });
  await shot(page, 'ops-task-detail');

  // The global SQL page: pick the store, run a count.
  await page.goto(`${BASE_URL}/sql?store=${encodeURIComponent(COMPARE_STORE)}`, { waitUntil: 'domcontentloaded' });
  await page.getByTestId('sql-input').waitFor();
  expectEq('ops: the SQL page picked the store from the link', await page.getByTestId('sql-store').inputValue(), COMPARE_STORE);
  await page.getByTestId('sql-input').fill('SELECT count(*) AS n FROM records');
  await page.getByTestId('sql-run').click();
  await page.getByTestId('sql-results').waitFor();
  expectEq('ops: the SQL page queries the picked store', ((await page.getByTestId('sql-row').first().locator('td').first().textContent()) ?? '').trim(), '3');
  await shot(page, 'ops-sql');

  // A record deep link.
  await page.goto(`${BASE_URL}/experiments/${encodeURIComponent(STORE)}/records/e2e-2`, { waitUntil: 'domcontentloaded' });
  const rec = page.locator('[data-testid="record-detail"][data-record-id="e2e-2"]');
  await rec.waitFor();
  expectEq('ops: the record link opens that record', ((await rec.locator('[data-field="content"] dd').textContent()) ?? '').trim(), 'hello, world');
  await shot(page, 'ops-record-link');

  // The run comparison: the two stores' mean reward by policy version on one chart.
  await page.goto(`${BASE_URL}/compare?stores=${encodeURIComponent(STORE)},${encodeURIComponent(COMPARE_STORE)}`, { waitUntil: 'domcontentloaded' });
  const chart = page.getByTestId('chart-compare');
  await chart.locator('svg.chart').waitFor({ timeout: 2 * WAIT_MS });
  expectEq('ops: the comparison draws one line per store', await chart.locator('[data-series]').count(), 2);
  const ticks = (await chart.locator('.visx-axis-bottom text, .axis text').allTextContents()).map((s) => s.trim());
  const i2 = ticks.indexOf('2');
  const i10 = ticks.indexOf('10');
  check('ops: policy versions in natural order on the comparison (2 before 10)', i2 >= 0 && i10 > i2, { ticks });
  await shot(page, 'ops-compare');

  // Tool-call JSON and logprobs in the conversation.
  await page.goto(`${BASE_URL}/experiments/${encodeURIComponent(STORE)}/rollouts/r-tool`, { waitUntil: 'domcontentloaded' });
  const turn = page.locator('[data-testid="turn"][data-record-id="e2e-tool-1"]');
  await turn.waitFor();
  const json = ((await turn.getByTestId('turn-json').textContent()) ?? '').trim();
  check('ops: a tool call is pretty-printed, its arguments too', json.includes('"arguments": {\n    "query": "lance format"'), { json: json.slice(0, 200) });
  const response = page.locator('[data-testid="turn"][data-record-id="e2e-tool-2"]').getByTestId('turn-json');
  expectEq('ops: a tool response inside tags is pretty-printed', await response.getAttribute('data-label'), 'tool_response');
  await turn.getByTestId('turn-logprobs').locator('summary').click();
  expectEq('ops: the logprobs of the turn are shown per token', await turn.getByTestId('logprob-token').count(), 4);
  check('ops: the logprob summary counts the tokens', ((await turn.getByTestId('logprob-summary-output').textContent()) ?? '').includes('4 · mean'));
  await shot(page, 'ops-conversation-tools');

  // 420 px wide: nothing is cut off (the page itself never scrolls sideways; tables scroll in their frame).
  await page.setViewportSize({ width: 420, height: 900 });
  for (const [name, path, ready] of [
    ['experiments', `/?search=${encodeURIComponent(STORE)}`, '[data-testid="experiments-table"][data-loading="false"]'],
    ['tasks', '/tasks', '[data-testid="tasks-table"][data-loading="false"]'],
    ['records', `${storeHref(STORE)}/records`, '[data-testid="records-table"][data-loading="false"]'],
    ['conversation', `/experiments/${encodeURIComponent(STORE)}/rollouts/r-tool`, '[data-testid="conversation"]'],
  ]) {
    await page.goto(`${BASE_URL}${path}`, { waitUntil: 'domcontentloaded' });
    await page.locator(ready).waitFor();
    const m = await page.evaluate(() => {
      const nav = document.querySelector('.nav');
      const links = [...document.querySelectorAll('.nav a')];
      const r = nav?.getBoundingClientRect();
      return {
        pageWidth: document.documentElement.scrollWidth,
        viewport: window.innerWidth,
        header: document.querySelector('.header')?.getBoundingClientRect().width ?? 0,
        // Every nav link reachable: inside the nav's box or the nav scrolls to it.
        navOk: Boolean(nav) && (nav.scrollWidth <= nav.clientWidth + 1 || getComputedStyle(nav).overflowX === 'auto') && links.length >= 4 && (r?.width ?? 0) <= window.innerWidth,
        tablesInFrame: [...document.querySelectorAll('table.grid')].every((t) => {
          const w = t.closest('.table-wrap');
          return w !== null && getComputedStyle(w).overflowX === 'auto';
        }),
      };
    });
    check(`narrow (420 px): ${name} does not overflow the screen`, m.pageWidth <= m.viewport && m.header <= m.viewport && m.navOk && m.tablesInFrame, m);
    await shot(page, `narrow-${name}`);
  }
  await page.setViewportSize({ width: 1360, height: 900 });
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

  if (TOKEN) {
    // Auth really is on: the same call without the token is refused.
    const bare = await fetch(`${BASE_URL}/api/v1/experiments`).catch((e) => ({ status: `error ${e.message}` }));
    expectEq('auth on: API without a token answers 401', bare.status, 401);
  }
  const createdEmpty = await api('POST', '/api/v1/rollouts', { name: EMPTY_STORE });
  if (createdEmpty.status !== 201 && createdEmpty.status !== 409) {
    throw new SetupError(`create store ${EMPTY_STORE}: HTTP ${createdEmpty.status}: ${apiMessage(createdEmpty)}`);
  }

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

    // Every API call from the page: with auth on it must carry the token, and no URL may hold it.
    const apiCalls = [];
    context.on('request', (req) => {
      const u = req.url();
      if (!u.startsWith(`${BASE_URL}/api/`)) return;
      apiCalls.push({ url: u, auth: req.headers()['authorization'] ?? '' });
    });

    try {
      // Experiments list -> search -> the store.
      const res = await page.goto(`${BASE_URL}/`, { waitUntil: 'domcontentloaded' });
      expectEq('UI index served', res?.status(), 200);
      if (TOKEN) await signIn(page, { wrongFirst: true, shots: true });
      await page.getByTestId('experiments-table').waitFor();
      if (!TOKEN) check('auth off: no sign-in prompt', (await page.getByTestId('signin').count()) === 0);
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
        if (s === 'all') await sameOrder(page, s, 'before merge');
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
        if (s === 'all') await sameOrder(page, s, 'after merge');
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
      await row.locator("td").first().click(); // not the middle: the rollout_id cell holds a link
      const detail = page.locator('[data-testid="record-detail"][data-record-id="e2e-1"]');
      await detail.waitFor();
      const field = async (f) => ((await detail.locator(`[data-field="${f}"] dd`).textContent()) ?? '').trim();
      expectEq('expanded row: rollout_id field', await field('rollout_id'), 'r1');
      expectEq('expanded row: content field', await field('content'), 'hello');
      check('expanded row: rollout_id visible', await detail.locator('[data-field="rollout_id"]').isVisible());
      check('expanded row: lists every field', (await detail.locator('[data-field]').count()) >= 35, {
        fields: await detail.locator('[data-field]').count(),
      });

      await page.screenshot({ path: SCREENSHOT, fullPage: true });

      // Each part fails on its own: one broken view must not hide the state of the others.
      for (const [name, part] of [
        ['conversation', () => checkConversation(page, browser)],
        ['charts', () => checkCharts(page)],
        ['storage', () => checkStorage(page)],
        ['sql', () => checkSql(page)],
        ['lifecycle', () => checkLifecycle(page)],
        ['operations', () => checkOperations(page)],
      ]) {
        try {
          await part();
        } catch (e) {
          if (e instanceof SetupError) throw e;
          check(`${name}: ran to the end`, false, { error: String(e?.message ?? e).split('\n')[0] });
          await shot(page, `${name}-failure`).catch(() => {});
        }
      }

      // Other views render.
      for (const [path, testid] of [
        ['/tasks', 'tasks-table'],
        ['/workers', 'workers-table'],
        ['/sql', 'global-sql'],
      ]) {
        await page.goto(`${BASE_URL}${path}`, { waitUntil: 'domcontentloaded' });
        await page.locator(`[data-testid="${testid}"][data-loading="false"]`).waitFor();
        check(`${path} view renders`, (await page.getByRole('alert').count()) === 0);
      }
    } catch (e) {
      await page.screenshot({ path: SCREENSHOT, fullPage: true }).catch(() => {});
      throw e;
    }
    const tokenInUrl = TOKEN ? apiCalls.filter((c) => c.url.includes(TOKEN)) : [];
    check('no URL carries the token', tokenInUrl.length === 0, { urls: tokenInUrl.map((c) => c.url) });
    if (TOKEN) {
      const bare = apiCalls.filter((c) => c.auth !== `Bearer ${TOKEN}`).map((c) => c.url);
      // The first call of a page goes out before the sign-in; count those, not every call.
      check('auth on: the page sent the token on its API calls', apiCalls.length > bare.length && bare.length <= 4, {
        calls: apiCalls.length,
        without_token: bare.length,
      });
    } else {
      check('auth off: no Authorization header sent', apiCalls.every((c) => !c.auth), { calls: apiCalls.length });
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
  screenshots: shots,
  auth: Boolean(TOKEN),
  duration_ms: Date.now() - started,
  checks,
  failed: failed.map((c) => c.name),
  error: error ?? null,
  notes,
  browser_errors: browserErrors,
};
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
process.exit(exitCode);
