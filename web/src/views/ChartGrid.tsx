// The overview's charts, drawn from the answer of GET .../charts (see Charts.tsx for the fetch).
import { useState } from 'react';
import type { Charts } from '../api';
import { ChartCard, Histogram, LegendItem, NoData, SeriesChart, toMillis } from '../charts';
import { fmtInt, fmtNum } from '../format';
import { PENDING_LIMIT, PENDING_WARN } from './pending';

type RewardPoint = Charts['reward_by_policy_version'][number];
type RewardTimePoint = Charts['reward_over_time'][number];
type LengthPoint = Charts['length_over_time'][number];
type IngestPoint = Charts['ingest_rate'][number];

function countTip(d: { count: number; p10: number | null; p90: number | null }): string {
  return `p10–p90: ${fmtNum(d.p10)} – ${fmtNum(d.p90)}\nrecords: ${fmtInt(d.count)}`;
}

const rewardLegend = (
  <>
    <LegendItem className="s-mean">mean</LegendItem>
    <LegendItem className="s-band">p10–p90</LegendItem>
  </>
);

/** "1 min", "5 min", "1 h", "6 h", "1 d", "7 d". */
export function fmtSeconds(s: number): string {
  if (s % 86400 === 0) return `${s / 86400} d`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

/** Bucket counts with the empty buckets between the first and the last put back as 0 (the server
 * sends only buckets that have rows; a line drawn across a gap would claim rows that never came). */
export function fillRateGaps(points: IngestPoint[], bucketSeconds: number | undefined, maxBuckets = 5000): IngestPoint[] {
  if (!bucketSeconds || bucketSeconds <= 0 || points.length < 2) return points;
  const step = bucketSeconds * 1000;
  const byT = new Map<number, number>();
  for (const p of points) {
    const m = toMillis(p.t);
    if (m === undefined) return points;
    byT.set(m, (byT.get(m) ?? 0) + p.rows);
  }
  const ts = [...byT.keys()].sort((a, b) => a - b);
  const first = ts[0];
  const last = ts[ts.length - 1];
  if ((last - first) / step > maxBuckets) return points;
  const out: IngestPoint[] = [];
  for (let t = first; t <= last; t += step) out.push({ t: new Date(t).toISOString(), rows: byT.get(t) ?? 0 });
  // A bucket off the grid (should not happen) would be lost: then keep the server's points.
  return out.reduce((n, p) => n + p.rows, 0) === points.reduce((n, p) => n + p.rows, 0) ? out : points;
}

export type VersionOrder = 'natural' | 'first';

/** Policy versions in the order asked: natural (as the server sends them: step-2 before step-10)
 * or by first appearance (first_seen; versions without one keep their natural place at the end). */
export function orderVersions(points: RewardPoint[], order: VersionOrder): RewardPoint[] {
  if (order === 'natural') return points;
  const at = (p: RewardPoint) => (p.first_seen ? Date.parse(p.first_seen) : Number.POSITIVE_INFINITY);
  return points
    .map((p, i) => ({ p, i }))
    .sort((a, b) => at(a.p) - at(b.p) || a.i - b.i)
    .map((x) => x.p);
}

export function ChartGrid({ charts }: { charts: Charts }) {
  const [order, setOrder] = useState<VersionOrder>('natural');
  const byVersion = orderVersions(charts.reward_by_policy_version ?? [], order);
  const overTime = charts.reward_over_time ?? [];
  const hist = charts.length_hist ?? [];
  const lenTime = charts.length_over_time ?? [];
  const ingestSeconds = charts.ingest_bucket_seconds ?? charts.bucket_seconds;
  const ingest = fillRateGaps(charts.ingest_rate ?? [], ingestSeconds);
  const per = ingestSeconds ? fmtSeconds(ingestSeconds) : 'interval';
  const pending = charts.pending ?? { wal_rows: 0, generations: 0 };
  return (
    <div className="chart-grid">
      <ChartCard
        title="Reward by policy_version"
        testId="chart-reward-version"
        subtitle={
          <select
            aria-label="Order of policy versions"
            data-testid="version-order"
            value={order}
            onChange={(e) => setOrder(e.target.value as VersionOrder)}
          >
            <option value="natural">natural order</option>
            <option value="first">first seen</option>
          </select>
        }
        legend={rewardLegend}
      >
        {byVersion.length ? (
          <SeriesChart<RewardPoint>
            label="Mean reward by policy version with the p10 to p90 band"
            data={byVersion}
            xKind="category"
            x={(d) => d.policy_version}
            band={{ y0: (d) => d.p10, y1: (d) => d.p90, label: 'p10–p90' }}
            lines={[{ key: 'mean', label: 'mean reward', y: (d) => d.mean, className: 's-mean' }]}
            tip={countTip}
          />
        ) : (
          <NoData>No rewards yet</NoData>
        )}
      </ChartCard>
      <ChartCard title="Reward over time" subtitle="(UTC)" testId="chart-reward-time" legend={rewardLegend}>
        {overTime.length ? (
          <SeriesChart<RewardTimePoint>
            label="Mean reward over time with the p10 to p90 band"
            data={overTime}
            xKind="time"
            x={(d) => d.t}
            band={{ y0: (d) => d.p10, y1: (d) => d.p90, label: 'p10–p90' }}
            lines={[{ key: 'mean', label: 'mean reward', y: (d) => d.mean, className: 's-mean' }]}
            tip={countTip}
          />
        ) : (
          <NoData>No rewards yet</NoData>
        )}
      </ChartCard>
      <ChartCard title="Response length" subtitle="(assistant rows: output tokens or characters)" testId="chart-length-hist">
        {hist.length ? <Histogram bins={hist} label="Distribution of response lengths" /> : <NoData>No responses yet</NoData>}
      </ChartCard>
      <ChartCard
        title="Response length over time"
        subtitle="(UTC)"
        testId="chart-length-time"
        legend={
          <>
            <LegendItem className="s-mean">mean</LegendItem>
            <LegendItem className="s-p50">p50</LegendItem>
            <LegendItem className="s-p90">p90</LegendItem>
          </>
        }
      >
        {lenTime.length ? (
          <SeriesChart<LengthPoint>
            label="Response length over time: mean, median and p90"
            data={lenTime}
            xKind="time"
            x={(d) => d.t}
            yZero
            lines={[
              { key: 'mean', label: 'mean', y: (d) => d.mean, className: 's-mean' },
              { key: 'p50', label: 'p50', y: (d) => d.p50, className: 's-p50' },
              { key: 'p90', label: 'p90', y: (d) => d.p90, className: 's-p90' },
            ]}
          />
        ) : (
          <NoData>No responses yet</NoData>
        )}
      </ChartCard>
      <ChartCard title="Ingest rate" subtitle={`(rows arrived per ${per}, UTC)`} testId="chart-ingest">
        {ingest.length ? (
          <SeriesChart<IngestPoint>
            label="Rows arrived per time interval"
            data={ingest}
            xKind="time"
            x={(d) => d.t}
            yZero
            lines={[{ key: 'rows', label: 'rows', y: (d) => d.rows, className: 's-mean' }]}
          />
        ) : (
          <NoData>No rows written yet</NoData>
        )}
      </ChartCard>
      <ChartCard title="Pending backlog" subtitle="(sealed WAL not yet merged)" testId="chart-pending">
        <Backlog rows={pending.wal_rows} generations={pending.generations} />
      </ChartCard>
    </div>
  );
}

/** The merge backlog against the read limit: a gauge of pending generations plus the row count. */
export function Backlog({ rows, generations }: { rows: number; generations: number }) {
  const frac = Math.min(1, Math.max(0, generations / PENDING_LIMIT));
  const level = generations >= PENDING_WARN ? 'warn' : 'ok';
  return (
    <div className="backlog" data-testid="backlog" data-level={level}>
      <div className="backlog-figures">
        <div>
          <div className="stat-value" data-testid="backlog-rows">
            {fmtInt(rows)}
          </div>
          <div className="stat-label">rows waiting in the WAL</div>
        </div>
        <div>
          <div className="stat-value" data-testid="backlog-generations">
            {fmtInt(generations)}
          </div>
          <div className="stat-label">pending generations</div>
        </div>
      </div>
      <div className="gauge" title={`${fmtInt(generations)} of ${fmtInt(PENDING_LIMIT)} pending generations (reads are refused beyond)`}>
        <div className={`gauge-fill ${level}`} style={{ width: `${Math.max(frac * 100, generations > 0 ? 1 : 0)}%` }} />
      </div>
      <p className="muted small">
        {generations === 0
          ? 'Everything written is merged into the base table.'
          : generations >= PENDING_WARN
            ? `Merge is falling behind: reads are refused at ${fmtInt(PENDING_LIMIT)} pending generations per shard.`
            : 'Merged by the next merge task (Merge WAL below, or the scheduler).'}
      </p>
    </div>
  );
}
