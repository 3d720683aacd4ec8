import { api } from '../api';
import { ErrorBanner, RelTime, StatusRows, Updated } from '../components';
import { usePoll } from '../live';

export function WorkersView() {
  const { data, error, loading, updatedAt } = usePoll('workers', (signal) => api.listWorkers(signal));
  const workers = [...(data?.workers ?? [])].sort((a, b) => a.instance_id.localeCompare(b.instance_id));
  return (
    <section>
      <div className="toolbar">
        <h1>Workers</h1>
        <span className="muted small">{data ? `${workers.length} live` : ''}</span>
        <span className="spacer" />
        <Updated at={updatedAt} />
      </div>
      <p className="note">Workers registered under an etcd lease. A worker running without etcd is not listed.</p>
      <ErrorBanner error={error} />
      <div className="table-wrap">
        <table className="grid" data-testid="workers-table" data-loading={loading ? 'true' : 'false'}>
          <thead>
            <tr>
              <th>Instance id</th>
              <th>Shard id</th>
              <th>Endpoint</th>
              <th>Version</th>
              <th>Registered</th>
            </tr>
          </thead>
          <tbody>
            {workers.map((w) => (
              <tr key={`${w.instance_id}/${w.shard_id}`} data-testid="worker-row">
                <td className="mono">{w.instance_id}</td>
                <td className="mono">{w.shard_id}</td>
                <td className="mono">{w.endpoint}</td>
                <td className="mono">{w.version ?? ''}</td>
                <td>
                  <RelTime value={w.registered_at} />
                </td>
              </tr>
            ))}
            <StatusRows cols={5} loading={loading} error={error} count={workers.length} empty="No live workers." />
          </tbody>
        </table>
      </div>
    </section>
  );
}
