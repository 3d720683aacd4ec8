// Lifecycle pieces: how far the base table lags the WAL tail, what a task did (cleanup included),
// and a store's tags (read from the worker route).
import { api, ApiError, errorMessage, type Experiment, type Task } from '../api';
import { Updated } from '../components';
import { fmtBytes, fmtDuration, fmtInt, parseTime } from '../format';
import { usePoll } from '../live';

/**
 * Merge lag (seconds) above which it is highlighted: the scheduler merges a shard whose oldest pending
 * generation is older than LC_MERGE_AFTER_AGE_SECS (default 60), so a lag past it means merges fall behind.
 */
export const LAG_WARN_SECONDS = 60;

/** The base table's lag behind the tail: "—" when nothing is pending, highlighted past LAG_WARN_SECONDS. */
export function MergeLag({ seconds }: { seconds: number | null | undefined }) {
  const s = typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
  const warn = s > LAG_WARN_SECONDS;
  return (
    <span
      className={warn ? 'lag lag-warn' : 'lag'}
      data-testid="merge-lag"
      // The exact figure: a lag of a few milliseconds must not read as none.
      data-lag-seconds={String(s)}
      data-warn={warn ? 'true' : 'false'}
      title={
        s
          ? `The base table (what LanceDB reads) lags the WAL tail by ${s.toFixed(1)} s: the age of the oldest un-merged generation${warn ? `; above ${LAG_WARN_SECONDS} s, merges fall behind` : ''}`
          : 'Nothing pending: the base table holds every sealed row'
      }
    >
      {fmtDuration(s)}
    </span>
  );
}

/**
 * Each shard's lag, in seconds, by shard id (undefined: nothing pending there). It is taken from the store's
 * merge_lag_seconds, which the server measured, less how much younger the shard's oldest pending generation
 * is than the store's oldest, so the browser's clock plays no part; without merge_lag_seconds, from the
 * browser's clock.
 */
export function shardLags(exp: Experiment, now: number = Date.now()): Map<string, number | undefined> {
  const out = new Map<string, number | undefined>();
  const shards = exp.shards ?? [];
  const oldest = new Map<string, number>();
  for (const s of shards) {
    const t = parseTime(s.oldest_pending_at)?.getTime();
    if (t !== undefined && s.pending_generations > 0) oldest.set(s.shard_id, t);
  }
  const first = oldest.size ? Math.min(...oldest.values()) : undefined;
  const lag = exp.merge_lag_seconds;
  for (const s of shards) {
    const t = oldest.get(s.shard_id);
    if (t === undefined || first === undefined) out.set(s.shard_id, undefined);
    else if (typeof lag === 'number' && lag > 0) out.set(s.shard_id, Math.max(0, lag - (t - first) / 1000));
    else out.set(s.shard_id, Math.max(0, (now - t) / 1000));
  }
  return out;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}

/** One line on what a finished task did; "" when it has no result (queued, running, failed). */
export function taskResultSummary(t: Task): string {
  const r = t.result;
  if (!r || typeof r !== 'object') return '';
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  const version = n(r.version) ? ` → v${fmtInt(n(r.version))}` : '';
  switch (t.kind) {
    case 'cleanup': {
      const versions = n(r.versions_removed);
      const files = n(r.files_removed);
      const bytes = n(r.bytes_removed);
      if (!versions && !files && !bytes) return 'nothing to remove';
      return `removed ${plural(versions, 'version')}, ${plural(files, 'file')}; ${fmtBytes(bytes)} reclaimed`;
    }
    case 'merge':
      if (!n(r.generations)) return 'nothing pending';
      return `${plural(n(r.generations), 'generation')}, ${plural(n(r.rows), 'row')} merged${n(r.replaced) ? ` (${fmtInt(n(r.replaced))} replaced)` : ''}${version}`;
    case 'compact':
      if (!n(r.fragments_removed)) return 'nothing to compact';
      return `${plural(n(r.fragments_removed), 'fragment')} → ${fmtInt(n(r.fragments_added))}${version}`;
    case 'index': {
      // Newer servers: indexes (snake_case); older: columns with Go field names.
      const cols = Array.isArray(r.indexes)
        ? r.indexes.map((c) => ({ built: Boolean(c?.built) }))
        : Array.isArray(r.columns)
          ? r.columns.map((c) => ({ built: Boolean(c?.Built) }))
          : [];
      const built = cols.filter((c) => c.built).length;
      return `${plural(cols.length, 'column')}, ${fmtInt(built)} updated`;
    }
    default:
      return '';
  }
}

/** How often the tags are re-read (they change rarely, and each read lists the table's tag files). */
export const TAGS_REFRESH_MS = 30_000;

/** The store's tags (name, version), from GET /api/v1/rollouts/{name}/tags. */
export function TagsPanel({ name }: { name: string }) {
  const { data, error, updatedAt } = usePoll(`tags:${name}`, (signal) => api.listTags(name, signal), TAGS_REFRESH_MS);
  // A master alone does not serve the worker routes (dev mode does): say so rather than show an error.
  const unserved = error instanceof ApiError && (error.status === 404 || error.status === 405) && !data;
  return (
    <div className="tags-panel" data-testid="tags-panel">
      <h2>
        Tags{' '}
        <span className="muted small">
          {data ? `(${data.length}) ` : ''}versions pinned by name; cleanup keeps them
        </span>{' '}
        <Updated at={updatedAt} />
      </h2>
      {unserved ? (
        <p className="muted" data-testid="tags-unavailable">
          Tags are read from a worker (<span className="mono">/api/v1/rollouts/…/tags</span>), which this server does not
          serve; use <span className="mono">lance-context tag list {name} --url WORKER</span>.
        </p>
      ) : error ? (
        <p className="muted" data-testid="tags-error">
          Tags unavailable: {errorMessage(error)}
        </p>
      ) : null}
      {data ? (
        <div className="table-wrap">
          <table className="grid" data-testid="tags-table">
            <thead>
              <tr>
                <th>Tag</th>
                <th className="num">Version</th>
              </tr>
            </thead>
            <tbody>
              {data.map((t) => (
                <tr key={t.name} data-testid="tag-row">
                  <td className="mono">{t.name}</td>
                  <td className="num">{fmtInt(t.version)}</td>
                </tr>
              ))}
              {data.length === 0 ? (
                <tr>
                  <td colSpan={2} className="empty" data-testid="tags-empty">
                    No tags. <span className="mono">lance-context tag create {name} NAME</span> pins the latest version.
                  </td>
                </tr>
              ) : null}
            </tbody>
          </table>
        </div>
      ) : null}
    </div>
  );
}
