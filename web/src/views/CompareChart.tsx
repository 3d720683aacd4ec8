// The comparison's drawing (visx), loaded as a chunk of its own as ChartGrid is.
import { ChartCard, LegendItem, NoData, SeriesChart } from '../charts';
import { COMPARE_METRICS, type CompareMetric, type ComparePoint } from '../compare';

export function CompareChart({ data, stores, metric }: { data: ComparePoint[]; stores: string[]; metric: CompareMetric }) {
  const m = COMPARE_METRICS.find((x) => x.id === metric) ?? COMPARE_METRICS[0];
  const drawn = data.some((p) => p.values.some((v) => v !== null));
  return (
    <div className="compare-chart">
      <ChartCard
        title={m.label}
        subtitle={m.x === 'time' ? '(UTC)' : undefined}
        testId="chart-compare"
        legend={
          <>
            {stores.map((s, i) => (
              <LegendItem key={s} className={`s-cmp-${i}`}>
                {s}
              </LegendItem>
            ))}
          </>
        }
      >
        {drawn ? (
          <SeriesChart<ComparePoint>
            label={`${m.label}: ${stores.join(', ')}`}
            data={data}
            xKind={m.x}
            x={(d) => d.x}
            lines={stores.map((s, i) => ({ key: s, label: s, y: (d: ComparePoint) => d.values[i], className: `s-cmp-${i}` }))}
          />
        ) : (
          <NoData>None of these stores has {m.unit === 'reward' ? 'rewards' : 'responses'} yet</NoData>
        )}
      </ChartCard>
    </div>
  );
}
