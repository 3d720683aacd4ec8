import { render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { Charts, Experiment } from './api';
import { extent, timeTickFormat, toMillis } from './charts';
import { jsonResponse, stubFetch } from './test/fetchStub';
import { ChartGrid, fillRateGaps, fmtSeconds } from './views/ChartGrid';

const EMPTY: Charts = {
  reward_by_policy_version: [],
  reward_over_time: [],
  length_hist: [],
  length_over_time: [],
  ingest_rate: [],
  pending: { wal_rows: 0, generations: 0 },
};

const T0 = '2026-01-01T10:00:00Z';

const SINGLE: Charts = {
  reward_by_policy_version: [{ policy_version: 'v1', mean: 0.5, p10: 0.1, p90: 0.9, count: 1 }],
  reward_over_time: [{ t: T0, mean: 0.5, p10: 0.1, p90: 0.9, count: 1 }],
  length_hist: [{ lo: 12, hi: 12, count: 1 }],
  length_over_time: [{ t: T0, mean: 12, p50: 12, p90: 12 }],
  ingest_rate: [{ t: T0, rows: 1 }],
  pending: { wal_rows: 1, generations: 1 },
};

const MANY: Charts = {
  reward_by_policy_version: [
    { policy_version: 1, mean: 0.2, p10: 0, p90: 0.5, count: 10 },
    { policy_version: 2, mean: 0.4, p10: 0.1, p90: 0.7, count: 12 },
    { policy_version: 3, mean: null, p10: null, p90: null, count: 0 },
    { policy_version: 4, mean: 0.8, p10: 0.5, p90: 1, count: 9 },
  ],
  reward_over_time: [
    { t: 1767261600, mean: 0.2, p10: 0, p90: 0.5, count: 10 }, // epoch seconds
    { t: 1767265200, mean: 0.6, p10: 0.2, p90: 0.9, count: 11 },
  ],
  length_hist: [
    { lo: 0, hi: 100, count: 3 },
    { lo: 100, hi: 200, count: 7 },
    { lo: 200, hi: 300, count: 0 },
  ],
  length_over_time: [
    { t: '2026-01-01T10:00:00Z', mean: 120, p50: 100, p90: 200 },
    { t: '2026-01-01T11:00:00Z', mean: 140, p50: 130, p90: 230 },
  ],
  ingest_rate: [
    { t: '2026-01-01T10:00:00Z', rows: 10 },
    { t: '2026-01-01T10:01:00Z', rows: 0 },
    { t: '2026-01-01T10:02:00Z', rows: 25 },
  ],
  pending: { wal_rows: 5000, generations: 300 },
};

const CARDS = ['chart-reward-version', 'chart-reward-time', 'chart-length-hist', 'chart-length-time', 'chart-ingest'];

describe('chart helpers', () => {
  it('reads times as epoch seconds, epoch ms or ISO strings', () => {
    expect(toMillis(1767261600)).toBe(Date.parse('2026-01-01T10:00:00Z'));
    expect(toMillis(1767261600000)).toBe(Date.parse('2026-01-01T10:00:00Z'));
    expect(toMillis('2026-01-01T10:00:00Z')).toBe(Date.parse('2026-01-01T10:00:00Z'));
    expect(toMillis('1767261600')).toBe(Date.parse('2026-01-01T10:00:00Z'));
    expect(toMillis('not a time')).toBeUndefined();
    expect(toMillis(null)).toBeUndefined();
  });

  it('labels time ticks by their step', () => {
    const t = Date.parse('2026-03-04T10:20:30Z');
    expect(timeTickFormat(86400_000, 5 * 86400_000)(t)).toBe('03-04');
    expect(timeTickFormat(600_000, 3600_000)(t)).toBe('10:20');
    expect(timeTickFormat(3600_000, 2 * 86400_000)(t)).toBe('03-04 10:20');
    expect(timeTickFormat(10_000, 60_000)(t)).toBe('10:20:30');
  });

  it('never returns a collapsed extent', () => {
    expect(extent([])).toEqual([0, 1]);
    expect(extent([null, undefined, NaN])).toEqual([0, 1]);
    expect(extent([0])).toEqual([-1, 1]);
    const [lo, hi] = extent([5]);
    expect(lo).toBeLessThan(5);
    expect(hi).toBeGreaterThan(5);
    expect(extent([2, 7, null, -1])).toEqual([-1, 7]);
    expect(extent([3, 4], true)).toEqual([0, 4]);
  });
});

describe('ingest rate', () => {
  it('puts the empty buckets back as zero', () => {
    const got = fillRateGaps(
      [
        { t: '2026-01-01T10:00:00Z', rows: 4 },
        { t: '2026-01-01T10:03:00Z', rows: 2 },
      ],
      60,
    );
    expect(got.map((p) => [p.t, p.rows])).toEqual([
      ['2026-01-01T10:00:00.000Z', 4],
      ['2026-01-01T10:01:00.000Z', 0],
      ['2026-01-01T10:02:00.000Z', 0],
      ['2026-01-01T10:03:00.000Z', 2],
    ]);
  });

  it('keeps the points as sent when the bucket width is unknown, a point is off the grid or too many buckets', () => {
    const two = [
      { t: '2026-01-01T10:00:00Z', rows: 4 },
      { t: '2026-01-01T10:03:30Z', rows: 2 },
    ];
    expect(fillRateGaps(two, undefined)).toBe(two);
    expect(fillRateGaps(two, 60)).toBe(two);
    const far = [
      { t: '2026-01-01T00:00:00Z', rows: 1 },
      { t: '2027-01-01T00:00:00Z', rows: 1 },
    ];
    expect(fillRateGaps(far, 60)).toBe(far);
    expect(fillRateGaps([], 60)).toEqual([]);
  });

  it('names the bucket width', () => {
    expect(fmtSeconds(60)).toBe('1 min');
    expect(fmtSeconds(900)).toBe('15 min');
    expect(fmtSeconds(21600)).toBe('6 h');
    expect(fmtSeconds(604800)).toBe('7 d');
  });
});

describe('chart grid', () => {
  it('shows a clear "no data" state for every chart on an empty store', () => {
    render(<ChartGrid charts={EMPTY} />);
    for (const id of CARDS) {
      const card = screen.getByTestId(id);
      expect(within(card).getByTestId('chart-empty').textContent).toMatch(/^No .* yet$/);
      expect(card.querySelector('svg')).toBeNull();
    }
    expect(screen.getByTestId('backlog-rows').textContent).toBe('0');
    expect(screen.getByTestId('backlog').textContent).toContain('Everything written is merged');
  });

  it('draws a single point as a visible dot, and its band as a whisker', () => {
    render(<ChartGrid charts={SINGLE} />);
    for (const id of CARDS) {
      const svg = screen.getByTestId(id).querySelector('svg')!;
      expect(svg, id).not.toBeNull();
      expect(svg.getAttribute('data-points'), id).toBe('1');
      // Nothing computed from a collapsed domain: no NaN anywhere in the drawing.
      expect(svg.outerHTML, id).not.toContain('NaN');
    }
    for (const id of ['chart-reward-version', 'chart-reward-time', 'chart-ingest']) {
      const dots = within(screen.getByTestId(id)).getAllByTestId('chart-dot');
      expect(dots, id).toHaveLength(1);
      expect(Number(dots[0].getAttribute('r'))).toBeGreaterThanOrEqual(4);
    }
    // mean, p50 and p90: one dot each.
    expect(within(screen.getByTestId('chart-length-time')).getAllByTestId('chart-dot')).toHaveLength(3);
    expect(within(screen.getByTestId('chart-reward-version')).getByTestId('chart-whisker')).toBeTruthy();
    // A zero-width histogram bin still gets a bar with a width.
    const bar = within(screen.getByTestId('chart-length-hist')).getByTestId('chart-bar');
    expect(Number(bar.getAttribute('width'))).toBeGreaterThan(0);
    expect(Number(bar.getAttribute('height'))).toBeGreaterThan(0);
    expect(screen.getByTestId('backlog-generations').textContent).toBe('1');
    // A single time point gets a single tick, at that point.
    const ticks = [...screen.getByTestId('chart-reward-time').querySelectorAll('.visx-axis-bottom .visx-axis-tick')];
    expect(ticks.map((t) => t.textContent)).toEqual(['10:00:00']);
  });

  it('draws the mean line over a p10-p90 band, skipping null points', () => {
    render(<ChartGrid charts={{ ...MANY, bucket_seconds: 60 }} />);
    expect(screen.getByTestId('chart-ingest').textContent).toContain('rows arrived per 1 min');
    const card = screen.getByTestId('chart-reward-version');
    // Three of four versions have a mean; the null one is skipped, not drawn as 0.
    expect(within(card).getAllByTestId('chart-dot')).toHaveLength(3);
    const band = card.querySelector('path.chart-band')!;
    expect(band.getAttribute('d')).toMatch(/^M/);
    expect(card.querySelector('path.chart-line')!.getAttribute('d')).toMatch(/^M.*L/);
    expect(card.querySelector('svg')!.outerHTML).not.toContain('NaN');
    // Every version appears on the x axis.
    const ticks = [...card.querySelectorAll('.visx-axis-bottom .visx-axis-tick')].map((t) => t.textContent);
    expect(ticks).toEqual(['1', '2', '3', '4']);
    expect(within(screen.getByTestId('chart-length-hist')).getAllByTestId('chart-bar')).toHaveLength(3);
    expect(within(screen.getByTestId('chart-ingest')).getAllByTestId('chart-dot')).toHaveLength(3);
    // 300 pending generations: over the warning level.
    expect(screen.getByTestId('backlog').getAttribute('data-level')).toBe('warn');
    expect(screen.getByTestId('backlog-rows').textContent).toBe('5,000');
  });

  it('tooltips carry the band and the count', () => {
    render(<ChartGrid charts={MANY} />);
    const dot = within(screen.getByTestId('chart-reward-version')).getAllByTestId('chart-dot')[0];
    expect(dot.querySelector('title')!.textContent).toContain('records: 10');
    expect(dot.querySelector('title')!.textContent).toContain('p10–p90: 0 – 0.5');
  });
});

const EXP: Experiment = { name: 'demo', rows: 3, fragments: 1, pending_generations: 0, shards: [] };

describe('overview charts', () => {
  it('fetches the charts of the store (source all by default) and draws them', async () => {
    const f = stubFetch({
      'GET /api/v1/experiments/demo': () => EXP,
      'GET /api/v1/experiments/demo/charts': () => MANY,
    });
    window.history.replaceState(null, '', '/experiments/demo');
    render(<App live={false} />);
    await waitFor(() => expect(screen.getByTestId('charts').getAttribute('data-loading')).toBe('false'));
    expect(f.last('/api/v1/experiments/demo/charts')!.url.searchParams.get('source')).toBe('all');
    // The drawing is loaded on demand: it shows up once its chunk is in.
    expect((await screen.findByTestId('chart-reward-version', {}, { timeout: 5000 })).querySelector('svg')).not.toBeNull();
  });

  it('asks for the statistics and the charts at once, and refreshes the charts less often', async () => {
    let release: () => void = () => {};
    const statsHeld = new Promise<void>((r) => (release = r));
    const f = stubFetch({
      'GET /api/v1/experiments/demo': async () => {
        await statsHeld; // the statistics stay unanswered until released
        return EXP;
      },
      'GET /api/v1/experiments/demo/charts': () => MANY,
    });
    window.history.replaceState(null, '', '/experiments/demo');
    render(<App live intervalMs={40} />);
    // The charts request does not wait for the statistics' answer.
    await waitFor(() => expect(f.to('/api/v1/experiments/demo/charts')).toHaveLength(1));
    expect(f.to('/api/v1/experiments/demo')).toHaveLength(1);
    release();
    // The statistics refresh every 40 ms; the charts keep their own, longer period.
    await waitFor(() => expect(f.to('/api/v1/experiments/demo').length).toBeGreaterThanOrEqual(3), { timeout: 5000 });
    expect(f.to('/api/v1/experiments/demo/charts')).toHaveLength(1);
  });

  it('shows the server message when the charts fail, and keeps the statistics', async () => {
    stubFetch({
      'GET /api/v1/experiments/demo': () => EXP,
      'GET /api/v1/experiments/demo/charts': () =>
        jsonResponse({ error: { code: 'resource_exhausted', message: 'query scanned more than 200000 rows (LC_SQL_MAX_SCAN_ROWS)' } }, 422),
    });
    window.history.replaceState(null, '', '/experiments/demo');
    render(<App live={false} />);
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toContain('Charts: query scanned more than 200000 rows');
    expect(screen.getByTestId('experiment-stats')).toBeTruthy();
  });
});
