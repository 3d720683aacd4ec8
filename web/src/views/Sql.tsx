import { useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { api, SOURCES, type QueryResult, type Source } from '../api';
import { Badge, ErrorBanner } from '../components';
import { fmtInt, fmtNum } from '../format';
import { Link } from '../router';
import { rolloutHref } from './Rollout';

const SOURCE_LABEL: Record<Source, string> = { fragments: 'Fragments', wal: 'WAL', all: 'All' };

export const DEFAULT_SQL = `SELECT policy_version, avg(reward) AS mean_reward, count(*) AS n
FROM records
GROUP BY 1
ORDER BY 1`;

const EXAMPLES: { label: string; sql: string }[] = [
  { label: 'Reward by policy_version', sql: DEFAULT_SQL },
  {
    label: 'Prompts that always fail',
    sql: `SELECT problem_id, count(*) AS attempts, max(reward) AS best
FROM records
WHERE role = 'assistant' AND problem_id IS NOT NULL
GROUP BY 1
HAVING max(reward) <= 0
ORDER BY attempts DESC
LIMIT 50`,
  },
  {
    label: 'Response length by policy_version',
    sql: `SELECT policy_version, avg(num_output_tokens) AS mean_tokens,
       quantile_cont(num_output_tokens, 0.9) AS p90_tokens
FROM records
WHERE role = 'assistant'
GROUP BY 1
ORDER BY 1`,
  },
  { label: 'Best rollouts', sql: `SELECT rollout_id, id, reward, content\nFROM records\nORDER BY reward DESC\nLIMIT 20` },
];

function draftKey(name: string): string {
  return `lc.sql.${name}`;
}

function loadDraft(name: string): string {
  try {
    return window.sessionStorage.getItem(draftKey(name)) ?? DEFAULT_SQL;
  } catch {
    return DEFAULT_SQL;
  }
}

function saveDraft(name: string, sql: string): void {
  try {
    window.sessionStorage.setItem(draftKey(name), sql);
  } catch {
    // not kept: fine
  }
}

/** A cell of a result: null marked, numbers formatted, nested values as JSON. */
export function Cell({ value }: { value: unknown }) {
  if (value === null || value === undefined) return <span className="muted">null</span>;
  if (typeof value === 'number') return <>{fmtNum(value)}</>;
  if (typeof value === 'boolean') return <>{String(value)}</>;
  if (typeof value === 'object') return <span className="mono">{JSON.stringify(value)}</span>;
  const s = String(value);
  return <>{s.length > 300 ? `${s.slice(0, 299)}…` : s}</>;
}

/** The SQL console of one store: the store is the table `records`. */
export function SqlView({ name }: { name: string }) {
  const [sql, setSql] = useState(() => loadDraft(name));
  const [source, setSource] = useState<Source>('all');
  const [result, setResult] = useState<QueryResult | undefined>();
  const [error, setError] = useState<unknown>();
  const [running, setRunning] = useState(false);
  const ctl = useRef<AbortController | null>(null);

  useEffect(() => () => ctl.current?.abort(), []);
  useEffect(() => saveDraft(name, sql), [name, sql]);

  const run = async () => {
    if (!sql.trim()) return;
    ctl.current?.abort();
    const c = new AbortController();
    ctl.current = c;
    setRunning(true);
    setError(undefined);
    try {
      const r = await api.query(name, sql, source, c.signal);
      if (c.signal.aborted) return;
      setResult(r);
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') return;
      setError(e);
      setResult(undefined);
    } finally {
      if (ctl.current === c) {
        ctl.current = null;
        setRunning(false);
      }
    }
  };

  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void run();
    }
  };

  const rolloutCol = result?.columns.findIndex((c) => c.name === 'rollout_id') ?? -1;

  return (
    <div className="sql" data-testid="sql-console">
      <p className="note">
        The store is the table <code>records</code>; other stores are tables under their own names. Read-only: the
        query can read only the stores, within the server's limits on rows scanned, rows returned, time and memory.
      </p>
      <textarea
        className="sql-input mono"
        value={sql}
        onChange={(e) => setSql(e.target.value)}
        onKeyDown={onKey}
        spellCheck={false}
        rows={Math.min(16, Math.max(5, sql.split('\n').length + 1))}
        aria-label="SQL query"
        data-testid="sql-input"
      />
      <div className="actions">
        <button type="button" className="primary" onClick={() => void run()} disabled={running || !sql.trim()} data-testid="sql-run" title="Ctrl+Enter">
          {running ? 'Running…' : 'Run'}
        </button>
        <span className="muted small">Ctrl+Enter</span>
        <label className="muted small inline-select">
          source{' '}
          <select value={source} onChange={(e) => setSource(e.target.value as Source)} data-testid="sql-source">
            {SOURCES.map((s) => (
              <option key={s} value={s}>
                {SOURCE_LABEL[s]}
              </option>
            ))}
          </select>
        </label>
        <label className="muted small inline-select">
          examples{' '}
          <select
            value=""
            onChange={(e) => {
              const ex = EXAMPLES.find((x) => x.label === e.target.value);
              if (ex) setSql(ex.sql);
            }}
            data-testid="sql-examples"
          >
            <option value="">—</option>
            {EXAMPLES.map((x) => (
              <option key={x.label} value={x.label}>
                {x.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <div data-testid="sql-error">
        <ErrorBanner error={error} />
      </div>
      {result ? (
        <>
          <p className="muted small" data-testid="sql-meta">
            {fmtInt(result.row_count)} {result.row_count === 1 ? 'row' : 'rows'} · {fmtInt(result.rows_scanned)} rows
            scanned · {fmtNum(result.elapsed_ms)} ms{' '}
            {result.truncated ? (
              <Badge kind="warn" title="The server's row limit cut the result: add a LIMIT or aggregate">
                truncated
              </Badge>
            ) : null}
          </p>
          <div className="table-wrap">
            <table className="grid" data-testid="sql-results">
              <thead>
                <tr>
                  {result.columns.map((c, i) => (
                    <th key={i} title={c.type} className={typeof result.rows[0]?.[i] === 'number' ? 'num' : undefined}>
                      {c.name} <span className="muted small">{c.type}</span>
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {result.rows.map((row, i) => (
                  <tr key={i} data-testid="sql-row">
                    {result.columns.map((_, j) => (
                      <td key={j} className={typeof row[j] === 'number' ? 'num' : undefined}>
                        {j === rolloutCol && typeof row[j] === 'string' && row[j] ? (
                          <Link to={rolloutHref(name, row[j] as string)} className="mono">
                            {row[j] as string}
                          </Link>
                        ) : (
                          <Cell value={row[j]} />
                        )}
                      </td>
                    ))}
                  </tr>
                ))}
                {result.rows.length === 0 ? (
                  <tr>
                    <td colSpan={Math.max(1, result.columns.length)} className="empty" data-testid="sql-empty">
                      The query returned no rows.
                    </td>
                  </tr>
                ) : null}
              </tbody>
            </table>
          </div>
        </>
      ) : null}
    </div>
  );
}
