// The overview's storage panel: what each live worker's write path is doing (GET /api/v1/workers/storage),
// beside the store's own statistics. Counts run since each worker started.
import { api, errorMessage } from '../api';
import type { Experiment, WorkerStorage } from '../api';
import { Badge, Updated } from '../components';
import { fmtInt } from '../format';
import { usePoll } from '../live';

/** A mean latency in ms, or a dash when nothing was measured. */
export function fmtMs(mean: number, n: number): string {
  if (!n || !Number.isFinite(mean)) return '—';
  if (mean < 1) return `${(mean * 1000).toFixed(0)} µs`;
  if (mean < 100) return `${mean.toFixed(1)} ms`;
  return `${fmtInt(Math.round(mean))} ms`;
}

/** Seals in total and by cause, largest first: "12 (flush 10, memtable_full 2)". */
export function fmtSeals(seals: Record<string, number> | null | undefined): string {
  const causes = Object.entries(seals ?? {}).filter(([, n]) => n > 0);
  const total = causes.reduce((a, [, n]) => a + n, 0);
  if (total === 0) return '0';
  causes.sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return `${fmtInt(total)} (${causes.map(([c, n]) => `${c} ${fmtInt(n)}`).join(', ')})`;
}

function WorkerRow({ w, writesHere }: { w: WorkerStorage; writesHere: boolean }) {
  const who = (
    <td>
      <span className="mono">{w.instance_id}</span>{' '}
      {writesHere ? (
        <Badge kind="info" title="This worker's shard has written to this store">
          this store
        </Badge>
      ) : null}
    </td>
  );
  if (w.error) {
    return (
      <tr data-testid="storage-row">
        {who}
        <td colSpan={6} className="muted">
          <Badge kind="warn">unreachable</Badge> {w.error}
        </td>
      </tr>
    );
  }
  return (
    <tr data-testid="storage-row">
      {who}
      <td className="num" title={`${fmtInt(w.wal_puts)} WAL entry puts (object log)`}>
        {fmtMs(w.wal_put_mean_ms, w.wal_puts)}
      </td>
      <td className="num" title={`${fmtInt(w.wal_syncs)} segment log syncs (local disk)`}>
        {fmtMs(w.wal_sync_mean_ms, w.wal_syncs)}
      </td>
      <td className="num" title={`mean seal time ${fmtMs(w.seal_mean_ms, 1)}`}>
        {fmtSeals(w.seals)}
      </td>
      <td className="num">{fmtInt(w.pending_generations)}</td>
      <td className="num">{fmtInt(w.unsealed_rows)}</td>
      <td className="num">
        {fmtInt(w.fenced_writers)} / {fmtInt(w.failed_writers)}{' '}
        {w.fenced_writers > 0 ? (
          <Badge kind="warn" title="A newer claim of a shard stopped one of this worker's writers">
            fenced
          </Badge>
        ) : null}
        {w.failed_writers > 0 ? (
          <Badge kind="failed" title="A failed log write stopped one of this worker's writers">
            failed
          </Badge>
        ) : null}
        {w.replay_corruptions > 0 ? (
          <Badge kind="failed" title="A claim found a corrupt WAL; see the repair command">
            corrupt log
          </Badge>
        ) : null}
      </td>
    </tr>
  );
}

export function StoragePanel({ exp }: { exp: Experiment | undefined }) {
  const { data, error, updatedAt } = usePoll('workers-storage', (signal) => api.workerStorage(signal));
  const workers = [...(data?.workers ?? [])].sort((a, b) => a.instance_id.localeCompare(b.instance_id));
  const here = new Set((exp?.shards ?? []).map((s) => s.shard_id));
  return (
    <div className="storage-panel" data-testid="storage-panel">
      <h2>
        Storage <span className="muted small">live workers, since each started</span> <Updated at={updatedAt} />
      </h2>
      {error ? (
        <p className="muted" data-testid="storage-error">
          Storage metrics unavailable: {errorMessage(error)}
        </p>
      ) : null}
      <div className="table-wrap">
        <table className="grid" data-testid="storage-table">
          <thead>
            <tr>
              <th>Worker</th>
              <th className="num" title="Mean time to put a WAL entry object (put-if-absent)">
                WAL put
              </th>
              <th className="num" title="Mean time to write and fdatasync a frame of the local segment log">
                WAL sync
              </th>
              <th className="num" title="Memtables sealed into generations, by cause">
                Seals
              </th>
              <th className="num" title="Sealed generations not yet merged, in this worker's shards">
                Pending gens
              </th>
              <th className="num" title="Rows acknowledged and not yet sealed">
                Unsealed rows
              </th>
              <th className="num" title="Writers stopped by a newer claim / by a failed log write">
                Fenced / failed
              </th>
            </tr>
          </thead>
          <tbody>
            {workers.map((w) => (
              <WorkerRow key={`${w.instance_id}/${w.shard_id}`} w={w} writesHere={here.has(w.shard_id)} />
            ))}
            {data && workers.length === 0 ? (
              <tr>
                <td colSpan={7} className="empty" data-testid="storage-empty">
                  No live worker reports storage metrics (a worker running without etcd is not listed).
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      </div>
    </div>
  );
}
