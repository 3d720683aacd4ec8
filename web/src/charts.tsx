// Small SVG charts drawn with visx (d3 scales and shapes as React components). Each chart is
// correct on empty data (a "no data yet" panel) and on a single point (a visible dot on a
// padded domain), and skips null values instead of drawing them as zero.
import { AxisBottom, AxisLeft } from '@visx/axis';
import { Group } from '@visx/group';
import { scaleLinear, scalePoint, scaleUtc } from '@visx/scale';
import { Area, Bar, LinePath } from '@visx/shape';
import type { ReactNode } from 'react';
import { fmtInt, fmtNum } from './format';

export const CHART_W = 520;
export const CHART_H = 200;
const M = { top: 10, right: 16, bottom: 30, left: 52 };
const IW = CHART_W - M.left - M.right;
const IH = CHART_H - M.top - M.bottom;
/** Dots are drawn on lines with at most this many points (always for a single point). */
const DOTS_MAX = 60;

export type XValue = string | number | null | undefined;

/** Milliseconds since the epoch of a chart time: epoch seconds or ms, or an ISO string. */
export function toMillis(t: XValue): number | undefined {
  if (t === null || t === undefined || t === '') return undefined;
  let n = typeof t === 'number' ? t : Number(t);
  if (typeof t === 'string' && !Number.isFinite(n)) n = Date.parse(t);
  if (!Number.isFinite(n)) return undefined;
  return Math.abs(n) < 1e11 ? n * 1000 : n; // seconds below year ~5138 in ms terms
}

function isNum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** [lo, hi] of the finite values, widened when empty or a single value so a scale never collapses. */
export function extent(values: unknown[], includeZero = false): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!isNum(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (includeZero) {
    lo = Math.min(lo, 0);
    hi = Math.max(hi, 0);
  }
  if (lo === Infinity) return [0, 1];
  if (lo === hi) {
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    return [lo - pad, hi + pad];
  }
  return [lo, hi];
}

/** Labels for time ticks `step` ms apart over a span: as short as they can be while distinct. */
export function timeTickFormat(step: number, spanMs: number): (ms: number) => string {
  const days = spanMs >= 86400_000;
  return (ms) => {
    const iso = new Date(ms).toISOString();
    if (step >= 86400_000) return iso.slice(5, 10); // MM-DD
    if (step >= 60_000) return days ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16); // HH:MM
    return iso.slice(11, 19); // HH:MM:SS
  };
}

export function ChartCard({
  title,
  subtitle,
  testId,
  children,
  legend,
}: {
  title: string;
  subtitle?: ReactNode;
  testId: string;
  children: ReactNode;
  legend?: ReactNode;
}) {
  return (
    <figure className="chart-card" data-testid={testId}>
      <figcaption>
        <span className="chart-title">{title}</span>
        {subtitle ? <span className="muted small"> {subtitle}</span> : null}
        {legend ? <span className="chart-legend">{legend}</span> : null}
      </figcaption>
      {children}
    </figure>
  );
}

export function NoData({ children = 'No data yet' }: { children?: ReactNode }) {
  return (
    <div className="chart-empty" data-testid="chart-empty" style={{ aspectRatio: `${CHART_W} / ${CHART_H}` }}>
      {children}
    </div>
  );
}

function Svg({ label, children, points }: { label: string; children: ReactNode; points: number }) {
  return (
    <svg
      className="chart"
      viewBox={`0 0 ${CHART_W} ${CHART_H}`}
      width="100%"
      role="img"
      aria-label={label}
      data-points={points}
    >
      <Group left={M.left} top={M.top}>
        {children}
      </Group>
    </svg>
  );
}

export interface Line<D> {
  key: string;
  label: string;
  y: (d: D) => number | null | undefined;
  className: string;
}

export interface SeriesChartProps<D> {
  data: D[];
  /** "category": x values are labels kept in data order (e.g. policy versions); "time": x is a time. */
  xKind: 'category' | 'time';
  x: (d: D) => XValue;
  lines: Line<D>[];
  /** An optional shaded band between two values (e.g. p10 and p90). */
  band?: { y0: (d: D) => number | null | undefined; y1: (d: D) => number | null | undefined; label: string };
  /** Extra text for a point's tooltip. */
  tip?: (d: D) => string;
  label: string;
  yZero?: boolean;
}

interface Pt<D> {
  d: D;
  px: number;
  xLabel: string;
}

/** Lines over categories or time, with an optional band; dots mark the points when they are few. */
export function SeriesChart<D>({ data, xKind, x, lines, band, tip, label, yZero }: SeriesChartProps<D>) {
  // Place points on x; drop those whose x cannot be read.
  const pts: Pt<D>[] = [];
  let xAxis: ReactNode;
  if (xKind === 'category') {
    const labels = data.map((d) => String(x(d) ?? '∅'));
    const uniq = [...new Set(labels)];
    const sx = scalePoint<string>({ domain: uniq, range: [0, IW], padding: 0.5 });
    data.forEach((d, i) => pts.push({ d, px: sx(labels[i]) ?? 0, xLabel: labels[i] }));
    const step = Math.max(1, Math.ceil(uniq.length / 8));
    const ticks = uniq.filter((_, i) => i % step === 0);
    xAxis = (
      <AxisBottom top={IH} scale={sx} tickValues={ticks} tickFormat={(v) => (v.length > 12 ? `${v.slice(0, 11)}…` : v)} axisClassName="axis" hideTicks={false} />
    );
  } else {
    const ms = data.map((d) => toMillis(x(d)));
    const known = ms.filter(isNum);
    let [lo, hi] = known.length ? [Math.min(...known), Math.max(...known)] : [0, 1];
    const single = lo === hi;
    if (single) {
      lo -= 30 * 60_000;
      hi += 30 * 60_000;
    }
    const sx = scaleUtc({ domain: [new Date(lo), new Date(hi)], range: [0, IW] });
    data.forEach((d, i) => {
      const m = ms[i];
      if (m !== undefined) pts.push({ d, px: sx(new Date(m)), xLabel: new Date(m).toISOString() });
    });
    // One point: one tick, at the point, to the second. Otherwise d3's ticks, labelled by their step.
    const ticks = single ? [new Date(known[0])] : sx.ticks(5);
    const step = ticks.length > 1 ? ticks[1].getTime() - ticks[0].getTime() : single ? 1000 : hi - lo;
    const fmt = timeTickFormat(step, hi - lo);
    xAxis = (
      <AxisBottom
        top={IH}
        scale={sx}
        tickValues={ticks}
        tickFormat={(v) => fmt(v instanceof Date ? v.getTime() : Number(v))}
        axisClassName="axis"
      />
    );
  }
  const yValues: unknown[] = [];
  for (const p of pts) {
    for (const l of lines) yValues.push(l.y(p.d));
    if (band) yValues.push(band.y0(p.d), band.y1(p.d));
  }
  const sy = scaleLinear<number>({ domain: extent(yValues, yZero), range: [IH, 0], nice: true });
  const showDots = pts.length <= DOTS_MAX;
  return (
    <Svg label={label} points={pts.length}>
      <AxisLeft scale={sy} numTicks={5} tickFormat={(v) => fmtNum(Number(v))} axisClassName="axis" />
      {xAxis}
      {band ? (
        <Area<Pt<D>>
          data={pts}
          x={(p) => p.px}
          y0={(p) => sy(band.y0(p.d) as number)}
          y1={(p) => sy(band.y1(p.d) as number)}
          defined={(p) => isNum(band.y0(p.d)) && isNum(band.y1(p.d))}
          className="chart-band"
          data-testid="chart-band"
        />
      ) : null}
      {band && pts.length === 1 && isNum(band.y0(pts[0].d)) && isNum(band.y1(pts[0].d)) ? (
        // A single point has no area: draw its band as a whisker.
        <line
          className="chart-whisker"
          x1={pts[0].px}
          x2={pts[0].px}
          y1={sy(band.y0(pts[0].d) as number)}
          y2={sy(band.y1(pts[0].d) as number)}
          data-testid="chart-whisker"
        />
      ) : null}
      {lines.map((l) => (
        <g key={l.key} data-series={l.key}>
          <LinePath<Pt<D>>
            data={pts}
            x={(p) => p.px}
            y={(p) => sy(l.y(p.d) as number)}
            defined={(p) => isNum(l.y(p.d))}
            className={`chart-line ${l.className}`}
          />
          {showDots
            ? pts.map((p, i) => {
                const v = l.y(p.d);
                if (!isNum(v)) return null;
                return (
                  <circle key={i} className={`chart-dot ${l.className}`} cx={p.px} cy={sy(v)} r={pts.length === 1 ? 4 : 2.5} data-testid="chart-dot">
                    <title>{`${p.xLabel}\n${l.label}: ${fmtNum(v)}${tip ? `\n${tip(p.d)}` : ''}`}</title>
                  </circle>
                );
              })
            : null}
        </g>
      ))}
    </Svg>
  );
}

export interface Bin {
  lo: number;
  hi: number;
  count: number;
}

/** Bars over [lo, hi) bins; a single bin (or one of zero width) is drawn centered. */
export function Histogram({ bins, label, unit }: { bins: Bin[]; label: string; unit?: string }) {
  const ok = bins.filter((b) => isNum(b.lo) && isNum(b.hi) && isNum(b.count));
  let [lo, hi] = extent(ok.flatMap((b) => [b.lo, b.hi]));
  if (ok.length && ok.every((b) => b.hi <= b.lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  const sx = scaleLinear<number>({ domain: [lo, hi], range: [0, IW] });
  const sy = scaleLinear<number>({ domain: [0, Math.max(1, ...ok.map((b) => b.count))], range: [IH, 0], nice: true });
  return (
    <Svg label={label} points={ok.length}>
      <AxisLeft scale={sy} numTicks={5} tickFormat={(v) => fmtInt(Number(v))} axisClassName="axis" />
      <AxisBottom top={IH} scale={sx} numTicks={6} tickFormat={(v) => fmtNum(Number(v))} axisClassName="axis" />
      {ok.map((b, i) => {
        const x0 = sx(b.lo);
        const w = Math.max(2, sx(b.hi) - x0 - 1);
        const y = sy(b.count);
        return (
          <Bar key={i} x={b.hi > b.lo ? x0 : x0 - 4} y={y} width={b.hi > b.lo ? w : 8} height={Math.max(0, IH - y)} className="chart-bar" data-testid="chart-bar">
            <title>{`${fmtNum(b.lo)}–${fmtNum(b.hi)}${unit ? ` ${unit}` : ''}: ${fmtInt(b.count)}`}</title>
          </Bar>
        );
      })}
    </Svg>
  );
}

export function LegendItem({ className, children }: { className: string; children: ReactNode }) {
  return (
    <span className="legend-item">
      <span className={`legend-swatch ${className}`} aria-hidden="true" />
      {children}
    </span>
  );
}
