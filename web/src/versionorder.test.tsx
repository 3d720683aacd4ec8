import { fireEvent, render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { Charts } from './api';
import { ChartGrid, orderVersions } from './views/ChartGrid';

// Versions as the server sends them: natural order (step-2 before step-10), each with the
// arrival of its first row. step-10 came first (a resumed run), step-2 last.
const BY_VERSION: Charts['reward_by_policy_version'] = [
  { policy_version: 'step-1', mean: 0.1, p10: 0, p90: 0.2, count: 3, first_seen: '2026-01-01T10:01:00Z' },
  { policy_version: 'step-2', mean: 0.2, p10: 0.1, p90: 0.3, count: 3, first_seen: '2026-01-01T10:09:00Z' },
  { policy_version: 'step-10', mean: 0.9, p10: 0.8, p90: 1, count: 3, first_seen: '2026-01-01T10:00:00Z' },
  { policy_version: 'old', mean: 0.5, p10: 0.5, p90: 0.5, count: 1 },
];

const CHARTS: Charts = {
  reward_by_policy_version: BY_VERSION,
  reward_over_time: [],
  length_hist: [],
  length_over_time: [],
  ingest_rate: [
    { t: '2026-01-01T10:00:00Z', rows: 4 },
    { t: '2026-01-01T10:10:00Z', rows: 6 },
  ],
  pending: { wal_rows: 0, generations: 0 },
  bucket_seconds: 86400,
  ingest_bucket_seconds: 300,
};

const ticks = () =>
  [...screen.getByTestId('chart-reward-version').querySelectorAll('.visx-axis-bottom .visx-axis-tick')].map((t) => t.textContent);

describe('reward by policy version', () => {
  it('keeps the natural order by default and orders by first appearance on request', () => {
    render(<ChartGrid charts={CHARTS} />);
    expect(ticks()).toEqual(['step-1', 'step-2', 'step-10', 'old']);
    fireEvent.change(screen.getByTestId('version-order'), { target: { value: 'first' } });
    expect(ticks()).toEqual(['step-10', 'step-1', 'step-2', 'old']);
    fireEvent.change(screen.getByTestId('version-order'), { target: { value: 'natural' } });
    expect(ticks()).toEqual(['step-1', 'step-2', 'step-10', 'old']);
  });

  it('orders versions without first_seen last, keeping their order', () => {
    const pts = orderVersions([BY_VERSION[3], BY_VERSION[1], { ...BY_VERSION[0], first_seen: undefined }], 'first');
    expect(pts.map((p) => p.policy_version)).toEqual(['step-2', 'old', 'step-1']);
  });
});

describe('ingest rate', () => {
  it('uses its own bucket width (arrival), not the created_at one', () => {
    render(<ChartGrid charts={CHARTS} />);
    const card = screen.getByTestId('chart-ingest');
    expect(card.textContent).toContain('rows arrived per 5 min');
    // The gap between the two buckets is filled with zeros at 5-minute steps: 3 points.
    expect(card.querySelector('path.chart-line')!.getAttribute('d')!.split('L')).toHaveLength(3);
  });
});
