// Client for the master's data-browser API (same origin, under /api/v1).
import { authHeaders, getToken, requestToken } from './auth';
import { takeChartsPrefetch } from './prefetch';

export const API_BASE = '/api/v1';

export type Source = 'fragments' | 'wal' | 'all';
export const SOURCES: readonly Source[] = ['fragments', 'wal', 'all'];

export interface Shard {
  shard_id: string;
  pending_generations: number;
  /** Rows in this shard's sealed, un-merged generations. */
  pending_rows?: number;
  epoch: number;
  watermark: number;
  /** When the shard's oldest pending generation was sealed (absent with none pending). */
  oldest_pending_at?: string | null;
}

export interface Experiment {
  name: string;
  rows: number;
  fragments: number;
  pending_generations: number;
  shards?: Shard[] | null;
  unflushed_rows?: number | null;
  version?: number | null;
  last_updated?: string | null;
  last_compaction?: string | null;
  needs_compaction?: boolean;
  /** Age of the oldest pending WAL generation, in seconds (0 with none): how far the base table, what LanceDB reads, lags the tail. */
  merge_lag_seconds?: number | null;
  stale?: boolean;
  error?: string;
  /** The reference's names for rows, fragments and pending_generations (newer servers send both). */
  row_count?: number | null;
  fragment_count?: number | null;
  pending_wal_generations?: number | null;
  /** Whether the store has been compacted (a boolean), or when it last was (a time); older servers leave it out. */
  compacted?: boolean | string | null;
}

/** Fragments at or above this count make a store worth compacting (the reference highlights them). */
export const FRAGMENTS_WARN = 16;

function num(...vs: (number | null | undefined)[]): number | undefined {
  for (const v of vs) if (typeof v === 'number' && Number.isFinite(v)) return v;
  return undefined;
}

/** Rows of a store, whichever name the server used. */
export function expRows(x: Experiment): number | undefined {
  return num(x.rows, x.row_count);
}

/** Base-table fragments of a store, whichever name the server used. */
export function expFragments(x: Experiment): number | undefined {
  return num(x.fragments, x.fragment_count);
}

/** Pending WAL generations over all shards, whichever name the server used. */
export function expPending(x: Experiment): number | undefined {
  return num(x.pending_generations, x.pending_wal_generations);
}

/** Whether a store is compacted: the server's "compacted" when it sends one, else from what it does send
 * (a last compaction time, or too many fragments). undefined when nothing says. */
export function expCompacted(x: Experiment): { compacted: boolean | undefined; at: string | undefined } {
  const at = typeof x.compacted === 'string' && x.compacted ? x.compacted : x.last_compaction ?? undefined;
  if (typeof x.compacted === 'boolean') return { compacted: x.compacted, at };
  if (typeof x.compacted === 'string' && x.compacted) return { compacted: true, at };
  const frags = expFragments(x);
  if (x.needs_compaction === true || (frags !== undefined && frags >= FRAGMENTS_WARN)) return { compacted: false, at };
  if (x.last_compaction) return { compacted: true, at };
  return { compacted: undefined, at };
}

/** One worker's storage metrics (GET /api/v1/workers/storage): counts since it started, means over them. */
export interface WorkerStorage {
  instance_id: string;
  shard_id: string;
  endpoint: string;
  /** Why the worker's metrics could not be read; the numbers are then zero. */
  error?: string;
  wal_puts: number;
  wal_put_mean_ms: number;
  wal_syncs: number;
  wal_sync_mean_ms: number;
  /** Memtables sealed, by cause (memtable_full, flush, claim, close). */
  seals: Record<string, number> | null;
  seal_mean_ms: number;
  fenced_writers: number;
  failed_writers: number;
  replay_corruptions: number;
  pending_generations: number;
  unsealed_rows: number;
  entry_rows_total: number;
}

export interface ExperimentList {
  experiments: Experiment[];
  total: number;
  stale?: boolean;
}

export interface Relationship {
  target_id?: string | null;
  relation?: string | null;
  weight?: number | null;
}

/** A rollout record. Every field may be null or absent. */
export interface RolloutRecord {
  id?: string | null;
  rollout_id?: string | null;
  problem_id?: string | null;
  dataset?: string | null;
  sequence_order?: number | null;
  role?: string | null;
  created_at?: string | null;
  content?: string | null;
  content_type?: string | null;
  model_input_string?: string | null;
  model_output_string?: string | null;
  rationale?: string | null;
  problem_text?: string | null;
  user_metadata?: unknown;
  input_tokens?: number[] | null;
  output_tokens?: number[] | null;
  num_input_tokens?: number | null;
  num_output_tokens?: number | null;
  output_logprobs?: number[] | null;
  input_logprobs?: number[] | null;
  ref_logprobs?: number[] | null;
  loss_mask?: number[] | null;
  advantage?: number | null;
  reward?: number | null;
  raw_reward?: number | null;
  score?: number | null;
  grader_id?: string | null;
  include_in_training?: boolean | null;
  exclude_reason?: string | null;
  policy_version?: string | number | null;
  relationships?: Relationship[] | null;
  payload_size?: number | null;
  payload_checksum?: string | null;
  artifact_type?: string | null;
  metadata?: string | null;
  [extra: string]: unknown;
}

export interface RecordPage {
  records: RolloutRecord[];
  has_more: boolean;
  limit: number;
  offset: number;
  source: Source | string;
}

export type TaskKind = 'merge' | 'compact' | 'index' | 'cleanup' | 'repair';
export const TASK_KINDS: readonly TaskKind[] = ['merge', 'compact', 'index', 'cleanup', 'repair'];
export type TaskState = 'queued' | 'running' | 'done' | 'failed';

/** What a finished task did (api.TaskResult; an index task answers its own shape). Every field may be absent. */
export interface TaskResult {
  passes?: number;
  generations?: number;
  rows?: number;
  replaced?: number;
  fragments_removed?: number;
  fragments_added?: number;
  files_removed?: number;
  files_added?: number;
  /** The base table version after the task. */
  version?: number;
  /** A cleanup's report (left out when zero). */
  versions_removed?: number;
  bytes_removed?: number;
  /** An index task's columns (older servers: Go field names). */
  columns?: { Column?: string; Built?: boolean }[] | null;
  /** An index task's indexes. */
  indexes?: { column?: string; built?: boolean; index?: string; version?: number; new_rows?: number; replaced?: number }[] | null;
  [extra: string]: unknown;
}

export interface Task {
  id: string;
  kind: TaskKind | string;
  store: string;
  state: TaskState | string;
  attempts?: number;
  error?: string | null;
  result?: TaskResult | null;
  /** "api" or "scheduler". */
  source?: string;
  created_at?: string | null;
  updated_at?: string | null;
  /** The reference's name for store. */
  target?: string;
  /** The task that must finish first (newer servers). */
  depends_on?: string | string[] | null;
  /** When the latest attempt started and when the task finished: Unix ms (this server) or a time string. */
  started_at?: string | number | null;
  finished_at?: string | number | null;
  /** When it was enqueued, Unix ms. */
  enqueued_at?: number | null;
  /** A one-line summary of what the task did (newer servers). */
  detail?: string | null;
  /** How long it ran (newer servers send one of these). */
  duration_ms?: number | null;
  duration_seconds?: number | null;
  not_before?: string | null;
}

/** A task's store, whichever name the server used. */
export function taskStore(t: Task): string {
  return t.store || t.target || '';
}

/** A task's dependencies as a list. */
export function taskDeps(t: Task): string[] {
  const d = t.depends_on;
  if (!d) return [];
  return Array.isArray(d) ? d.filter(Boolean) : [d];
}

/** A time as Unix ms: from Unix ms, or from a time string; undefined when absent or zero. */
export function toMs(s: string | number | null | undefined): number | undefined {
  if (s === null || s === undefined || s === '') return undefined;
  const v = typeof s === 'number' ? s : Date.parse(s);
  return Number.isFinite(v) && v > 0 ? v : undefined;
}

/** A time as an ISO string (for display), from Unix ms or a string. */
export function toIso(s: string | number | null | undefined): string | undefined {
  const v = toMs(s);
  return v === undefined ? undefined : new Date(v).toISOString();
}

/** How long a task ran, in ms, and whether it still runs: the server's duration when it sends one, else
 * from started_at to finished_at (or to now while running). undefined when the task has not started or the
 * server sends no times to tell. */
export function taskDuration(t: Task, now = Date.now()): { ms: number; running: boolean } | undefined {
  const running = t.state === 'running';
  if (typeof t.duration_ms === 'number' && Number.isFinite(t.duration_ms)) return { ms: Math.max(0, t.duration_ms), running };
  if (typeof t.duration_seconds === 'number' && Number.isFinite(t.duration_seconds)) return { ms: Math.max(0, t.duration_seconds * 1000), running };
  const start = toMs(t.started_at);
  if (start === undefined) return undefined;
  const end = toMs(t.finished_at) ?? (running ? now : undefined);
  if (end === undefined) return undefined;
  return { ms: Math.max(0, end - start), running };
}

/** A tag pinning a version of a store's base table (a worker route; cleanup keeps tagged versions). */
export interface Tag {
  name: string;
  version: number;
  manifest_size?: number;
}

export interface Worker {
  instance_id: string;
  shard_id: string;
  endpoint: string;
  version?: string | null;
  registered_at?: string | null;
}

/** Equality filters accepted by the records listing. */
export const RECORD_FILTER_KEYS = [
  'id',
  'rollout_id',
  'problem_id',
  'dataset',
  'role',
  'content_type',
  'policy_version',
  'artifact_type',
  'include_in_training',
] as const;
export type RecordFilterKey = (typeof RECORD_FILTER_KEYS)[number];
export type RecordFilters = Partial<Record<RecordFilterKey, string>>;

export const PAGE_SIZE = 25;
export const MAX_RECORD_LIMIT = 100;

/** An error answered by the API ({"error":{"code","message"}}) or a network failure (status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

type QueryValue = string | number | boolean | null | undefined;

/** Builds "?a=1&b=x" from the defined, non-empty values, in insertion order; "" when none. */
export function buildQuery(params: Record<string, QueryValue>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    const s = String(v).trim();
    if (s === '') continue;
    q.append(k, s);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

function clampInt(v: number | undefined, lo: number, hi: number, dflt: number): number {
  if (v === undefined || !Number.isFinite(v)) return dflt;
  return Math.min(hi, Math.max(lo, Math.trunc(v)));
}

export interface RecordsQuery {
  source?: Source;
  limit?: number;
  offset?: number;
  filters?: RecordFilters;
}

/** Query string of a records listing. The source defaults to "fragments"; limit is clamped to 1..100. */
export function recordsQueryString(q: RecordsQuery = {}): string {
  const params: Record<string, QueryValue> = {
    source: q.source ?? 'fragments',
    limit: clampInt(q.limit, 1, MAX_RECORD_LIMIT, PAGE_SIZE),
    offset: clampInt(q.offset, 0, Number.MAX_SAFE_INTEGER, 0),
  };
  const f = q.filters ?? {};
  for (const k of RECORD_FILTER_KEYS) {
    let v = f[k];
    if (k === 'include_in_training' && v !== undefined && v !== 'true' && v !== 'false') v = undefined;
    params[k] = v;
  }
  return buildQuery(params);
}

export interface ExperimentsQuery {
  search?: string;
  limit?: number;
  offset?: number;
}

export function experimentsQueryString(q: ExperimentsQuery = {}): string {
  return buildQuery({
    search: q.search,
    limit: q.limit === undefined ? undefined : clampInt(q.limit, 1, 1000, PAGE_SIZE),
    offset: q.offset === undefined ? undefined : clampInt(q.offset, 0, Number.MAX_SAFE_INTEGER, 0),
  });
}

const enc = encodeURIComponent;

export function experimentPath(name: string): string {
  return `${API_BASE}/experiments/${enc(name)}`;
}

/** A store under the worker's routes (tags live there; dev mode serves them beside the master's). */
export function rolloutPath(name: string): string {
  return `${API_BASE}/rollouts/${enc(name)}`;
}

export function recordPath(store: string, id: string): string {
  return `${experimentPath(store)}/records/${enc(id)}`;
}

export function blobUrl(store: string, id: string): string {
  return `${recordPath(store, id)}/blob`;
}

/** Turns a non-2xx response into an ApiError, using {"error":{"code","message"}} when present. */
export async function parseError(res: Response): Promise<ApiError> {
  let text = '';
  try {
    text = await res.text();
  } catch {
    // body unreadable: fall back to the status line
  }
  let code = `http_${res.status}`;
  let message = '';
  if (text) {
    try {
      const body = JSON.parse(text) as unknown;
      const err = (body as { error?: unknown } | null)?.error;
      if (err && typeof err === 'object') {
        const e = err as { code?: unknown; message?: unknown };
        if (typeof e.code === 'string' && e.code) code = e.code;
        if (typeof e.message === 'string') message = e.message;
      } else if (typeof err === 'string') {
        message = err;
      }
    } catch {
      message = text.trim().slice(0, 500);
    }
  }
  if (!message) message = `${res.status} ${res.statusText || 'request failed'}`.trim();
  return new ApiError(res.status, code, message);
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
}

async function send(path: string, init: RequestInit, accept: string): Promise<Response> {
  // Up to one sign-in per attempt: a 401 asks for the token (or a new one) and retries.
  for (;;) {
    const sent = getToken();
    let res: Response;
    try {
      res = await fetch(path, { ...init, headers: { Accept: accept, ...(init.headers as Record<string, string>), ...authHeaders() } });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      const msg = e instanceof Error ? e.message : String(e);
      throw new ApiError(0, 'network', `network error: ${msg}`);
    }
    if (res.status !== 401) return res;
    const err = await parseError(res);
    try {
      await requestToken(sent);
    } catch (e) {
      throw e instanceof ApiError ? e : err;
    }
    if (init.signal?.aborted) throw new DOMException('aborted', 'AbortError');
  }
}

export async function request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const init: RequestInit = { method: opts.method ?? 'GET', signal: opts.signal };
  if (opts.body !== undefined) {
    init.body = JSON.stringify(opts.body);
    init.headers = { 'Content-Type': 'application/json' };
  }
  const res = await send(path, init, 'application/json');
  if (!res.ok) throw await parseError(res);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  if (!text) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ApiError(res.status, 'bad_response', 'the server answered with invalid JSON');
  }
}

/** Reads a record's payload (with the token, which a plain link or <img> could not send). */
export async function fetchBlob(store: string, id: string, signal?: AbortSignal): Promise<Blob> {
  const res = await send(blobUrl(store, id), { method: 'GET', signal }, '*/*');
  if (!res.ok) throw await parseError(res);
  return res.blob();
}

/** Upper bound on the records of one conversation read page by page through the listing. */
export const MAX_ROLLOUT_RECORDS = 2000;

export interface Rollout {
  records: RolloutRecord[];
  /** True when the rollout has more than MAX_ROLLOUT_RECORDS records (only the first are shown). */
  truncated: boolean;
}

/** Orders turns as the trajectory API does: sequence_order, then id. */
export function compareTurns(a: RolloutRecord, b: RolloutRecord): number {
  const sa = a.sequence_order ?? Number.MAX_SAFE_INTEGER;
  const sb = b.sequence_order ?? Number.MAX_SAFE_INTEGER;
  if (sa !== sb) return sa - sb;
  const ia = a.id ?? '';
  const ib = b.id ?? '';
  return ia < ib ? -1 : ia > ib ? 1 : 0;
}

async function readRollout(name: string, rolloutId: string, signal?: AbortSignal): Promise<Rollout> {
  // The trajectory route reads base and WAL, ordered by (sequence_order, id).
  const t: { records: RolloutRecord[] } = await request(`${experimentPath(name)}/trajectories/${enc(rolloutId)}`, { signal });
  const records = t.records ?? [];
  return { records: [...records].sort(compareTurns).slice(0, MAX_ROLLOUT_RECORDS), truncated: records.length > MAX_ROLLOUT_RECORDS };
}

export interface QueryColumn {
  name: string;
  type: string;
}

export interface QueryResult {
  columns: QueryColumn[];
  rows: unknown[][];
  row_count: number;
  truncated: boolean;
  rows_scanned: number;
  elapsed_ms: number;
}

export interface Band {
  mean: number | null;
  p10: number | null;
  p90: number | null;
  count: number;
}

export interface Charts {
  /** In natural order (step-2 before step-10); first_seen is the arrival of a version's first row. */
  reward_by_policy_version: (Band & { policy_version: string | number | null; first_seen?: string })[];
  reward_over_time: (Band & { t: string | number })[];
  length_hist: { lo: number; hi: number; count: number }[];
  length_over_time: { t: string | number; mean: number | null; p50: number | null; p90: number | null }[];
  ingest_rate: { t: string | number; rows: number }[];
  pending: { wal_rows: number; generations: number };
  /** Width of the time buckets (by created_at), in seconds. */
  bucket_seconds?: number;
  /** Width of the ingest rate's buckets (by arrival), in seconds; older servers send only bucket_seconds. */
  ingest_bucket_seconds?: number;
  rows_scanned?: number;
  elapsed_ms?: number;
}

export const api = {
  listExperiments(q: ExperimentsQuery, signal?: AbortSignal): Promise<ExperimentList> {
    return request(`${API_BASE}/experiments${experimentsQueryString(q)}`, { signal });
  },
  getExperiment(name: string, fresh = true, signal?: AbortSignal): Promise<Experiment> {
    return request(`${experimentPath(name)}${buildQuery({ fresh: fresh ? 'true' : undefined })}`, { signal });
  },
  listRecords(name: string, q: RecordsQuery, signal?: AbortSignal): Promise<RecordPage> {
    return request(`${experimentPath(name)}/records${recordsQueryString(q)}`, { signal });
  },
  async getRecord(name: string, id: string, signal?: AbortSignal): Promise<RolloutRecord> {
    // The API answers {"record": ...} or {"record": null} (the reference's shape).
    const r: { record: RolloutRecord | null } = await request(recordPath(name, id), { signal });
    if (!r || !r.record) throw new ApiError(404, 'NOT_FOUND', `no record "${id}" in ${name}`);
    return r.record;
  },
  compact(name: string): Promise<{ task: Task }> {
    return request(`${experimentPath(name)}/compact`, { method: 'POST' });
  },
  merge(name: string): Promise<{ task: Task }> {
    return request(`${experimentPath(name)}/merge`, { method: 'POST' });
  },
  cleanup(name: string): Promise<{ task: Task }> {
    return request(`${experimentPath(name)}/cleanup`, { method: 'POST' });
  },
  /** The store's tags, from the worker route (absent on a master alone: a 404). */
  async listTags(name: string, signal?: AbortSignal): Promise<Tag[]> {
    const r: { tags?: Tag[] | null } = await request(`${rolloutPath(name)}/tags`, { signal });
    return [...(r?.tags ?? [])].sort((a, b) => b.version - a.version || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  },
  listTasks(signal?: AbortSignal): Promise<{ tasks: Task[] }> {
    return request(`${API_BASE}/tasks`, { signal });
  },
  getTask(id: string, signal?: AbortSignal): Promise<Task> {
    return request(`${API_BASE}/tasks/${enc(id)}`, { signal });
  },
  /** Enqueues a task; with dependsOn it runs after that task (servers without depends_on refuse the field). */
  createTask(kind: TaskKind, store: string, dependsOn?: string): Promise<Task> {
    // "store" (ours; the server takes the reference's "target" too).
    const body: Record<string, string> = { kind, store };
    if (dependsOn) body.depends_on = dependsOn;
    return request(`${API_BASE}/tasks`, { method: 'POST', body });
  },
  optimize(store: string): Promise<OptimizeResult> {
    return optimize(store, (kind, s, dep) => api.createTask(kind, s, dep));
  },
  getRollout(name: string, rolloutId: string, signal?: AbortSignal): Promise<Rollout> {
    return readRollout(name, rolloutId, signal);
  },
  query(name: string, sql: string, source: Source, signal?: AbortSignal): Promise<QueryResult> {
    return request(`${experimentPath(name)}/query`, { method: 'POST', body: { sql, source }, signal });
  },
  async charts(name: string, source: Source, signal?: AbortSignal): Promise<Charts> {
    if (source === 'all') {
      const pre = await takeChartsPrefetch(name);
      if (pre !== undefined) return pre as Charts;
    }
    return request(`${experimentPath(name)}/charts${buildQuery({ source })}`, { signal });
  },
  listWorkers(signal?: AbortSignal): Promise<{ workers: Worker[] }> {
    return request(`${API_BASE}/workers`, { signal });
  },
  workerStorage(signal?: AbortSignal): Promise<{ workers: WorkerStorage[] }> {
    return request(`${API_BASE}/workers/storage`, { signal });
  },
};

/** The Optimize chain: merge the WAL, then compact, then bring the indexes up to date. */
export const OPTIMIZE_CHAIN: readonly TaskKind[] = ['merge', 'compact', 'index'];

export interface OptimizeResult {
  tasks: Task[];
  /** False when the server does not know depends_on: the tasks were enqueued without an order between them. */
  ordered: boolean;
}

/** True for a 400 that refuses the depends_on field (a server from before task dependencies). */
export function refusesDependsOn(e: unknown): boolean {
  return e instanceof ApiError && e.status === 400 && /depends_on/i.test(e.message);
}

/** Enqueues OPTIMIZE_CHAIN, each task depending on the one before. A server that refuses depends_on gets
 * the rest of the chain without it (and ordered is false). */
export async function optimize(
  store: string,
  create: (kind: TaskKind, store: string, dependsOn?: string) => Promise<Task>,
): Promise<OptimizeResult> {
  const tasks: Task[] = [];
  let ordered = true;
  for (const kind of OPTIMIZE_CHAIN) {
    const prev = tasks[tasks.length - 1];
    let t: Task;
    if (prev && ordered) {
      try {
        t = await create(kind, store, prev.id);
      } catch (e) {
        if (!refusesDependsOn(e)) throw e;
        ordered = false;
        t = await create(kind, store);
      }
    } else {
      t = await create(kind, store);
    }
    tasks.push(t);
  }
  return { tasks, ordered };
}

export function errorMessage(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}
