import { Fragment, useEffect, useState, type FormEvent, type KeyboardEvent } from 'react';
import {
  api,
  blobUrl,
  fetchBlob,
  PAGE_SIZE,
  RECORD_FILTER_KEYS,
  recordPath,
  SOURCES,
  type RecordFilterKey,
  type RecordFilters,
  type RolloutRecord,
  type Source,
} from '../api';
import { ErrorBanner, Pager, StatusRows, Updated } from '../components';
import { compactArray, fmtBytes, fmtInt, fmtNum, preview, relTime, shortTime, absTime } from '../format';
import { usePoll } from '../live';
import { getToken } from '../auth';
import { intParam, Link, updateQuery, useLocation } from '../router';
import { pendingRows } from './pending';
import { rolloutHref } from './Rollout';

const SOURCE_LABEL: Record<Source, string> = { fragments: 'Fragments', wal: 'WAL', all: 'All' };
const SOURCE_HELP: Record<Source, string> = {
  fragments: 'Merged base table only (fast; may lag the most recent un-merged writes)',
  wal: 'Only the un-merged tail: sealed WAL generations not yet folded into the base table',
  all: 'Base table and WAL tail together: one row per id, the newest write winning; shown in the order the API lists them (by id)',
};

const FILTER_LABEL: Record<RecordFilterKey, string> = {
  id: 'id',
  rollout_id: 'rollout_id',
  problem_id: 'problem_id',
  dataset: 'dataset',
  role: 'role',
  content_type: 'content_type',
  policy_version: 'policy_version',
  artifact_type: 'artifact_type',
  include_in_training: 'include_in_training',
};

function parseSource(v: string | null): Source {
  return v === 'wal' || v === 'all' ? v : 'fragments';
}

function filtersFrom(search: URLSearchParams): RecordFilters {
  const f: RecordFilters = {};
  for (const k of RECORD_FILTER_KEYS) {
    const v = search.get(k);
    if (v !== null && v !== '') f[k] = v;
  }
  return f;
}

export function RecordsView({ name }: { name: string }) {
  const { search } = useLocation();
  const source = parseSource(search.get('source'));
  const offset = intParam(search, 'offset');
  const filters = filtersFrom(search);
  const filtersKey = JSON.stringify(filters);

  const key = JSON.stringify([name, source, offset, filters]);
  const { data, error, loading, updatedAt } = usePoll(key, (signal) =>
    api.listRecords(name, { source, limit: PAGE_SIZE, offset, filters }, signal),
  );
  const [expanded, setExpanded] = useState<Set<string>>(() => new Set());
  const toggle = (k: string) =>
    setExpanded((s) => {
      const n = new Set(s);
      if (n.has(k)) n.delete(k);
      else n.add(k);
      return n;
    });

  const setSource = (s: Source) => updateQuery({ source: s === 'fragments' ? undefined : s, offset: undefined });
  const setOffset = (o: number) => updateQuery({ offset: o > 0 ? o : undefined });

  const records = data?.records ?? [];
  const shownOffset = data?.offset ?? offset;
  const page = Math.floor(shownOffset / PAGE_SIZE) + 1;
  const info = !data
    ? '…'
    : records.length
      ? `Rows ${fmtInt(shownOffset + 1)}–${fmtInt(shownOffset + records.length)} · page ${page}`
      : `No rows · page ${page}`;

  return (
    <div>
      <div className="subtabs" role="tablist" aria-label="Record source">
        {SOURCES.map((s) => (
          <button
            key={s}
            type="button"
            role="tab"
            aria-selected={s === source}
            className={s === source ? 'subtab active' : 'subtab'}
            data-testid={`source-tab-${s}`}
            title={SOURCE_HELP[s]}
            onClick={() => setSource(s)}
          >
            {SOURCE_LABEL[s]}
          </button>
        ))}
        <span className="spacer" />
        <span className="muted small" data-testid="records-source">
          source: <span className="mono">{data ? String(data.source) : '…'}</span>
        </span>
        <Updated at={updatedAt} />
      </div>
      {source === 'fragments' ? (
        <p className="note" data-testid="fragments-note">
          Fragments reads only the merged base table: it is fast, but may lag the most recent un-merged writes. Use
          WAL or All to see them.
        </p>
      ) : (
        <p className="note">{SOURCE_HELP[source]}.</p>
      )}
      <FilterForm applied={filters} appliedKey={filtersKey} />
      <ErrorBanner error={error} />
      <div className="table-wrap">
        <table
          className="grid records"
          data-testid="records-table"
          data-loading={loading ? 'true' : 'false'}
          data-source={data ? String(data.source) : ''}
          aria-busy={loading}
        >
          <thead>
            <tr>
              <th>id</th>
              <th>rollout_id</th>
              <th>role</th>
              <th className="num">seq</th>
              <th title="UTC">created_at</th>
              <th className="num">reward</th>
              <th>content</th>
            </tr>
          </thead>
          <tbody>
            {records.map((r, i) => {
              const k = r.id ? `id:${r.id}` : `at:${shownOffset + i}`;
              const open = expanded.has(k);
              const onKey = (e: KeyboardEvent) => {
                if (e.key === 'Enter' || e.key === ' ') {
                  e.preventDefault();
                  toggle(k);
                }
              };
              return (
                <Fragment key={k}>
                  <tr
                    className={open ? 'record-row open' : 'record-row'}
                    data-testid="record-row"
                    data-record-id={r.id ?? ''}
                    tabIndex={0}
                    aria-expanded={open}
                    onClick={() => toggle(k)}
                    onKeyDown={onKey}
                  >
                    <td className="mono nowrap">
                      <span className="caret">{open ? '▾' : '▸'}</span>
                      {r.id ?? '—'}
                    </td>
                    <td className="mono">
                      {r.rollout_id ? (
                        <Link
                          to={rolloutHref(name, r.rollout_id)}
                          onClick={(e) => e.stopPropagation()}
                          title="Open this rollout as a conversation"
                          data-testid="rollout-link"
                        >
                          {r.rollout_id}
                        </Link>
                      ) : (
                        '—'
                      )}
                    </td>
                    <td>{r.role ?? ''}</td>
                    <td className="num">{r.sequence_order ?? ''}</td>
                    <td className="nowrap" title={absTime(r.created_at)}>
                      {shortTime(r.created_at)}
                    </td>
                    <td className="num">{fmtNum(r.reward)}</td>
                    <td className="preview">{preview(r.content, 100)}</td>
                  </tr>
                  {open ? (
                    <tr className="detail-row">
                      <td colSpan={7}>
                        <RecordDetail store={name} record={r} />
                      </td>
                    </tr>
                  ) : null}
                </Fragment>
              );
            })}
            <StatusRows
              cols={7}
              loading={loading}
              error={error}
              count={records.length}
              empty={
                Object.keys(filters).length ? (
                  'No record matches these filters.'
                ) : source === 'fragments' && offset === 0 ? (
                  <EmptyFragments name={name} />
                ) : (
                  'No records in this source.'
                )
              }
              emptyTestId="records-empty"
            />
          </tbody>
        </table>
      </div>
      <Pager
        canPrev={shownOffset > 0}
        canNext={Boolean(data?.has_more)}
        onPrev={() => setOffset(Math.max(0, shownOffset - PAGE_SIZE))}
        onNext={() => setOffset(shownOffset + (data?.limit || PAGE_SIZE))}
        info={info}
      />
    </div>
  );
}

/** Filter inputs; applied (URL updated, page reset) on submit. */
function FilterForm({ applied, appliedKey }: { applied: RecordFilters; appliedKey: string }) {
  const [draft, setDraft] = useState<RecordFilters>(applied);
  const active = Object.keys(applied).length;
  const [open, setOpen] = useState(active > 0);
  // Follow the applied filters when they change (submit, back/forward), not on every refresh.
  useEffect(() => setDraft(applied), [appliedKey]);

  const apply = (f: RecordFilters) => {
    const changes: Record<string, string | undefined> = { offset: undefined };
    for (const k of RECORD_FILTER_KEYS) changes[k] = f[k]?.trim() || undefined;
    updateQuery(changes);
  };
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    apply(draft);
  };
  const set = (k: RecordFilterKey, v: string) => setDraft((d) => ({ ...d, [k]: v }));

  return (
    <details className="filters" open={open} onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>
        Filters{active ? <span className="badge badge-info">{active} active</span> : null}
      </summary>
      <form onSubmit={onSubmit} data-testid="filter-form">
        <div className="filter-grid">
          {RECORD_FILTER_KEYS.map((k) =>
            k === 'include_in_training' ? (
              <label key={k}>
                <span>{FILTER_LABEL[k]}</span>
                <select
                  name={k}
                  value={draft[k] ?? ''}
                  onChange={(e) => set(k, e.target.value)}
                  data-testid={`filter-${k}`}
                >
                  <option value="">any</option>
                  <option value="true">true</option>
                  <option value="false">false</option>
                </select>
              </label>
            ) : (
              <label key={k}>
                <span>{FILTER_LABEL[k]}</span>
                <input
                  name={k}
                  value={draft[k] ?? ''}
                  onChange={(e) => set(k, e.target.value)}
                  data-testid={`filter-${k}`}
                  autoComplete="off"
                  spellCheck={false}
                />
              </label>
            ),
          )}
        </div>
        <div className="filter-actions">
          <button type="submit" className="primary" data-testid="filter-apply">
            Apply
          </button>
          <button
            type="button"
            data-testid="filter-reset"
            onClick={() => {
              setDraft({});
              apply({});
            }}
          >
            Clear
          </button>
        </div>
      </form>
    </details>
  );
}

/** The fields of a record, in the contract's order; unknown fields follow. */
export const RECORD_FIELDS = [
  'id',
  'rollout_id',
  'problem_id',
  'dataset',
  'sequence_order',
  'role',
  'created_at',
  'content',
  'content_type',
  'model_input_string',
  'model_output_string',
  'rationale',
  'problem_text',
  'user_metadata',
  'input_tokens',
  'output_tokens',
  'num_input_tokens',
  'num_output_tokens',
  'output_logprobs',
  'input_logprobs',
  'ref_logprobs',
  'loss_mask',
  'advantage',
  'reward',
  'raw_reward',
  'score',
  'grader_id',
  'include_in_training',
  'exclude_reason',
  'policy_version',
  'relationships',
  'payload_size',
  'payload_checksum',
  'artifact_type',
  'metadata',
] as const;

const LONG_TEXT = new Set(['content', 'model_input_string', 'model_output_string', 'rationale', 'problem_text']);
const ARRAY_PREVIEW = 16;

function tryJson(s: string): unknown {
  const t = s.trim();
  if (!(t.startsWith('{') || t.startsWith('['))) return undefined;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return undefined;
  }
}

function FieldValue({ name, value }: { name: string; value: unknown }) {
  if (value === null || value === undefined) return <span className="muted">null</span>;
  if (Array.isArray(value)) {
    if (name === 'relationships') {
      if (value.length === 0) return <span className="muted">[] (0)</span>;
      return (
        <ul className="rels">
          {value.map((r, i) => {
            const rel = (r ?? {}) as { target_id?: unknown; relation?: unknown; weight?: unknown };
            return (
              <li key={i}>
                <span className="mono">{String(rel.relation ?? '?')}</span> →{' '}
                <span className="mono">{String(rel.target_id ?? '?')}</span>
                {rel.weight !== null && rel.weight !== undefined ? (
                  <span className="muted"> (weight {String(rel.weight)})</span>
                ) : null}
              </li>
            );
          })}
        </ul>
      );
    }
    const head = (
      <>
        <span className="len">[{value.length}]</span> <span className="mono">{compactArray(value, ARRAY_PREVIEW)}</span>
      </>
    );
    if (value.length <= ARRAY_PREVIEW) return head;
    return (
      <details className="array">
        <summary>{head}</summary>
        <pre className="text">{compactArray(value, value.length)}</pre>
      </details>
    );
  }
  if (typeof value === 'object') return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
  if (typeof value === 'boolean') return <span className="mono">{String(value)}</span>;
  if (typeof value === 'number') {
    if (name === 'payload_size') return <span className="mono">{`${fmtBytes(value)} (${fmtInt(value)} bytes)`}</span>;
    return <span className="mono">{fmtNum(value)}</span>;
  }
  const s = String(value);
  if (name === 'metadata' || name === 'user_metadata') {
    const parsed = tryJson(s);
    if (parsed !== undefined) return <pre className="json">{JSON.stringify(parsed, null, 2)}</pre>;
  }
  if (name === 'created_at') {
    return (
      <span className="mono" title={absTime(s)}>
        {s} <span className="muted">({relTime(s)})</span>
      </span>
    );
  }
  if (LONG_TEXT.has(name) || s.length > 120 || s.includes('\n')) return <pre className="text">{s}</pre>;
  return <span className="mono">{s}</span>;
}

/** The link to one record of a store (it opens the record, from the base table or the WAL). */
export function recordHref(store: string, id: string): string {
  return `/experiments/${encodeURIComponent(store)}/records/${encodeURIComponent(id)}`;
}

export function RecordDetail({ store, record, standalone }: { store: string; record: RolloutRecord; standalone?: boolean }) {
  const known = new Set<string>(RECORD_FIELDS);
  const extra = Object.keys(record).filter((k) => !known.has(k));
  const fields = [...RECORD_FIELDS, ...extra];
  const id = record.id ?? '';
  const size = typeof record.payload_size === 'number' ? record.payload_size : 0;
  const [downloadError, setDownloadError] = useState<unknown>();
  return (
    <div className="record-detail" data-testid="record-detail" data-record-id={id}>
      <ErrorBanner error={downloadError} prefix="Download" />
      <div className="detail-actions">
        {record.rollout_id ? (
          <Link to={rolloutHref(store, record.rollout_id)} className="button" data-testid="open-rollout">
            Open conversation
          </Link>
        ) : null}
        {id && !standalone ? (
          <Link to={recordHref(store, id)} className="button" data-testid="record-link" title="A page of its own for this record: a link to share">
            Link to this record
          </Link>
        ) : null}
        {id && size > 0 ? (
          <a
            href={blobUrl(store, id)}
            download
            data-testid="payload-download"
            className="button primary"
            onClick={(e) => {
              // With a token a plain link would get 401: fetch with the header and save the bytes.
              if (!getToken()) return;
              e.preventDefault();
              void saveBlob(store, id, setDownloadError);
            }}
          >
            Download payload ({fmtBytes(size)})
          </a>
        ) : null}
        {id && !getToken() ? (
          <a href={recordPath(store, id)} target="_blank" rel="noreferrer" className="button">
            Open JSON
          </a>
        ) : null}
      </div>
      <dl className="fields">
        {fields.map((f) => (
          <div className="field" key={f} data-field={f}>
            <dt>{f}</dt>
            <dd>
              <FieldValue name={f} value={record[f]} />
            </dd>
          </div>
        ))}
      </dl>
    </div>
  );
}

async function saveBlob(store: string, id: string, onError: (e: unknown) => void): Promise<void> {
  try {
    const blob = await fetchBlob(store, id);
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = `${id}.bin`;
    document.body.appendChild(a);
    a.click();
    a.remove();
    window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
    onError(undefined);
  } catch (e) {
    onError(e);
  }
}

/** The empty Fragments tab: how many rows wait in the WAL (from the store's statistics). */
function EmptyFragments({ name }: { name: string }) {
  const { data } = usePoll(`exp:${name}:walrows`, (signal) => api.getExperiment(name, false, signal));
  const rows = pendingRows(data);
  const gens = data?.pending_generations ?? 0;
  if (!data) return <>No merged records yet.</>;
  if (rows === undefined ? gens === 0 : rows === 0) {
    return <>No records in this store yet.</>;
  }
  return (
    <span data-testid="fragments-wal-hint">
      No merged records yet:{' '}
      {rows !== undefined ? (
        <strong>{fmtInt(rows)} {rows === 1 ? 'row waits' : 'rows wait'}</strong>
      ) : (
        <strong>rows wait</strong>
      )}{' '}
      in the WAL ({fmtInt(gens)} pending {gens === 1 ? 'generation' : 'generations'}).{' '}
      <Link to={`/experiments/${encodeURIComponent(name)}/records?source=wal`}>Show the WAL</Link> or merge it from the
      overview.
    </span>
  );
}
