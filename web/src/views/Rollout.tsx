import { useEffect, useState } from 'react';
import { api, fetchBlob, MAX_ROLLOUT_RECORDS, type RolloutRecord } from '../api';
import { Badge, CrumbBar, ErrorBanner } from '../components';
import { absTime, fmtBytes, fmtInt, fmtNum, shortTime } from '../format';
import { usePoll } from '../live';
import { experimentHref } from './Experiments';
import { RecordDetail } from './Records';
import { logprobLevel, logprobStats, splitJson } from '../turns';

/** A turn's text with tool-call JSON (the whole turn, or tool-call tags and fences in it) indented. */
export function TurnText({ text }: { text: string }) {
  const segs = splitJson(text);
  return (
    <div className="turn-content" data-testid="turn-content">
      {segs.map((s, i) =>
        s.kind === 'text' ? (
          <span key={i}>{s.text}</span>
        ) : (
          <pre key={i} className="json turn-json" data-testid="turn-json" data-label={s.label ?? ''}>
            {s.label ? <span className="muted small">{s.label}{'\n'}</span> : null}
            {JSON.stringify(s.value, null, 2)}
          </pre>
        ),
      )}
    </div>
  );
}

/** Tokens of a logprob strip shown at once (a long response opens the rest on request). */
const LOGPROB_TOKENS = 512;

const LOGPROB_FIELDS = [
  ['output_logprobs', 'output'],
  ['input_logprobs', 'input'],
  ['ref_logprobs', 'reference'],
] as const;

/** A turn's logprobs: a summary per array, and the output tokens shaded by probability. */
export function Logprobs({ record }: { record: RolloutRecord }) {
  const [all, setAll] = useState(false);
  const stats = LOGPROB_FIELDS.map(([f, label]) => ({ f, label, st: logprobStats(record[f] as unknown[] | null | undefined) })).filter((x) => x.st);
  if (!stats.length) return null;
  const out = Array.isArray(record.output_logprobs) ? record.output_logprobs : [];
  const toks = Array.isArray(record.output_tokens) ? record.output_tokens : [];
  const shown = all ? out : out.slice(0, LOGPROB_TOKENS);
  return (
    <details className="turn-extra logprobs" data-testid="turn-logprobs">
      <summary>
        logprobs{' '}
        {stats.map(({ f, label, st }) => (
          <span key={f} className="chip" data-testid={`logprob-summary-${label}`} title={`${f}: ${st!.n} tokens`}>
            <span className="chip-label">{label}</span> {fmtInt(st!.n)} · mean {fmtNum(st!.mean)} · min {fmtNum(st!.min)} · ppl {fmtNum(st!.perplexity)}
          </span>
        ))}
      </summary>
      {out.length ? (
        <div className="logprob-strip" aria-label="Output tokens shaded by probability (darker: less likely)">
          {shown.map((lp, i) => {
            const ok = typeof lp === 'number' && Number.isFinite(lp);
            const tok = toks[i];
            return (
              <span
                key={i}
                className={`lp lp-${ok ? logprobLevel(lp) : 'x'}`}
                title={`#${i}${tok !== undefined ? ` token ${tok}` : ''}: logprob ${ok ? lp.toFixed(4) : String(lp)}${ok ? ` (p ${Math.exp(lp).toFixed(3)})` : ''}`}
                data-testid="logprob-token"
              >
                {tok !== undefined ? tok : i}
              </span>
            );
          })}
          {out.length > shown.length ? (
            <button type="button" className="link-button small" onClick={() => setAll(true)}>
              all {fmtInt(out.length)} tokens
            </button>
          ) : null}
        </div>
      ) : null}
    </details>
  );
}

export function rolloutHref(store: string, rolloutId: string): string {
  return `/experiments/${encodeURIComponent(store)}/rollouts/${encodeURIComponent(rolloutId)}`;
}

/** Payloads up to this size are previewed at once; larger ones on request. */
export const AUTO_PREVIEW_BYTES = 1 << 20;
/** Characters of a text payload shown. */
const TEXT_PREVIEW_CHARS = 20000;

function isTextType(t: string): boolean {
  return t.startsWith('text/') || /json|xml|yaml|csv|javascript/.test(t);
}

/** Bytes read to recognise a payload whose type the server does not know (application/octet-stream). */
const SNIFF_BYTES = 256 * 1024;

/** The type of a payload from its first bytes: an image by its magic number, or UTF-8 text. */
export function sniff(b: Uint8Array, whole: boolean): string | undefined {
  const at = (i: number, ...xs: number[]) => xs.every((x, k) => b[i + k] === x);
  if (at(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'image/png';
  if (at(0, 0xff, 0xd8, 0xff)) return 'image/jpeg';
  if (at(0, 0x47, 0x49, 0x46, 0x38)) return 'image/gif';
  if (at(0, 0x52, 0x49, 0x46, 0x46) && at(8, 0x57, 0x45, 0x42, 0x50)) return 'image/webp';
  if (b.length === 0) return undefined;
  // Text: valid UTF-8 (a sequence cut at the end of a partial read is allowed) without control bytes.
  for (const c of b) if (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return undefined;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(whole ? b : b.subarray(0, Math.max(0, b.length - 3)));
    return 'text/plain';
  } catch {
    return undefined;
  }
}

type Preview =
  | { kind: 'image'; url: string; type: string }
  | { kind: 'text'; text: string; more: boolean; type: string }
  | { kind: 'binary'; url: string; type: string };

/** A record's payload: an image or the start of a text shown inline, anything else as a download. */
export function PayloadPreview({ store, record }: { store: string; record: RolloutRecord }) {
  const id = record.id ?? '';
  const size = typeof record.payload_size === 'number' ? record.payload_size : 0;
  const [wanted, setWanted] = useState(size > 0 && size <= AUTO_PREVIEW_BYTES);
  const [preview, setPreview] = useState<Preview | undefined>();
  const [error, setError] = useState<unknown>();

  useEffect(() => {
    if (!wanted || !id) return;
    const ctl = new AbortController();
    let url: string | undefined;
    fetchBlob(store, id, ctl.signal).then(
      async (blob) => {
        let type = (blob.type || '').toLowerCase();
        let detected = false;
        if (!type || type === 'application/octet-stream') {
          const head = new Uint8Array(await blob.slice(0, SNIFF_BYTES).arrayBuffer());
          const t = sniff(head, blob.size <= SNIFF_BYTES);
          if (t) {
            type = t;
            detected = true;
          }
        }
        if (ctl.signal.aborted) return;
        const label = detected ? `${type} (detected)` : type || 'application/octet-stream';
        if (type.startsWith('image/')) {
          url = URL.createObjectURL(detected ? new Blob([blob], { type }) : blob);
          setPreview({ kind: 'image', url, type: label });
        } else if (isTextType(type)) {
          const text = await blob.slice(0, TEXT_PREVIEW_CHARS * 4).text();
          setPreview({ kind: 'text', text: text.slice(0, TEXT_PREVIEW_CHARS), more: blob.size > TEXT_PREVIEW_CHARS, type: label });
        } else {
          url = URL.createObjectURL(blob);
          setPreview({ kind: 'binary', url, type: label });
        }
      },
      (e: unknown) => {
        if (!(e instanceof DOMException && e.name === 'AbortError')) setError(e);
      },
    );
    return () => {
      ctl.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [wanted, store, id]);

  if (!id || size <= 0) return null;
  return (
    <div className="payload" data-testid="payload-preview" data-kind={preview?.kind ?? ''}>
      <div className="muted small">
        payload · {fmtBytes(size)}
        {preview ? ` · ${preview.type}` : ''}
      </div>
      {!wanted ? (
        <button type="button" onClick={() => setWanted(true)} data-testid="payload-load">
          Load preview ({fmtBytes(size)})
        </button>
      ) : null}
      <ErrorBanner error={error} prefix="Payload" />
      {preview?.kind === 'image' ? <img src={preview.url} alt={`payload of ${id}`} className="payload-image" /> : null}
      {preview?.kind === 'text' ? (
        <pre className="text">
          {preview.text}
          {preview.more ? '\n…' : ''}
        </pre>
      ) : null}
      {preview?.kind === 'binary' ? (
        <a href={preview.url} download={`${id}.bin`} className="button">
          Download ({fmtBytes(size)})
        </a>
      ) : null}
    </div>
  );
}

function Chip({ label, value, title }: { label: string; value: string; title?: string }) {
  return (
    <span className="chip" title={title}>
      <span className="chip-label">{label}</span> {value}
    </span>
  );
}

function Turn({ store, record }: { store: string; record: RolloutRecord }) {
  const [open, setOpen] = useState(false);
  const role = (record.role ?? 'unknown').toLowerCase();
  const cls = ['user', 'assistant', 'system', 'tool'].includes(role) ? role : 'other';
  const tokens =
    record.num_input_tokens != null || record.num_output_tokens != null
      ? `${fmtInt(record.num_input_tokens)} in / ${fmtInt(record.num_output_tokens)} out`
      : undefined;
  const text = record.content ?? record.model_output_string ?? '';
  return (
    <li className={`turn turn-${cls}`} data-testid="turn" data-role={role} data-record-id={record.id ?? ''}>
      <div className="turn-head">
        <span className="turn-role">{record.role ?? 'unknown'}</span>
        <span className="muted small">#{record.sequence_order ?? '—'}</span>
        <span className="spacer" />
        {record.reward != null ? <Chip label="reward" value={fmtNum(record.reward)} /> : null}
        {record.advantage != null ? <Chip label="advantage" value={fmtNum(record.advantage)} /> : null}
        {record.score != null ? <Chip label="score" value={fmtNum(record.score)} /> : null}
        {tokens ? <Chip label="tokens" value={tokens} /> : null}
        {record.include_in_training === false ? (
          <Badge kind="warn" title={record.exclude_reason ?? undefined}>
            excluded
          </Badge>
        ) : null}
        <span className="muted small" title={absTime(record.created_at)}>
          {record.created_at ? shortTime(record.created_at) : ''}
        </span>
      </div>
      {text ? (
        <TurnText text={text} />
      ) : (
        <div className="turn-content muted">(no content)</div>
      )}
      {record.rationale ? (
        <details className="turn-extra">
          <summary>rationale</summary>
          <pre className="text">{record.rationale}</pre>
        </details>
      ) : null}
      <Logprobs record={record} />
      <PayloadPreview store={store} record={record} />
      <button type="button" className="link-button small" onClick={() => setOpen((o) => !o)} aria-expanded={open} data-testid="turn-fields">
        {open ? 'Hide fields' : 'All fields'}
      </button>
      {open ? <RecordDetail store={store} record={record} /> : null}
    </li>
  );
}

/** A rollout as a conversation: its records in sequence_order, read from the base table and the WAL. */
export function RolloutView({ name, rolloutId }: { name: string; rolloutId: string }) {
  const { data, error, loading } = usePoll(JSON.stringify(['rollout', name, rolloutId]), (signal) =>
    api.getRollout(name, rolloutId, signal),
  );
  const turns = data?.records ?? [];
  const first = turns[0];
  const rewards = turns.map((t) => t.reward).filter((r): r is number => typeof r === 'number');
  const versions = [...new Set(turns.map((t) => t.policy_version).filter((v) => v !== null && v !== undefined).map(String))];
  const withTokens = turns.filter((t) => typeof t.num_output_tokens === 'number');
  const tokensOut = withTokens.length ? withTokens.reduce((n, t) => n + (t.num_output_tokens as number), 0) : undefined;

  return (
    <section data-testid="rollout-view" data-loading={loading ? 'true' : 'false'}>
      <CrumbBar
        name={name}
        storeHref={experimentHref(name, 'records')}
        leaf={rolloutId}
        leafTestId="rollout-id"
        copyTestId="copy-link"
        copyTitle="Copy a link to this conversation"
      />
      <ErrorBanner error={error} />
      {loading && !error ? <p className="muted">Loading…</p> : null}
      {data ? (
        <>
          <div className="stats" data-testid="rollout-summary">
            <div className="stat">
              <div className="stat-label">Turns</div>
              <div className="stat-value">{fmtInt(turns.length)}</div>
            </div>
            <div className="stat">
              <div className="stat-label">Total reward</div>
              <div className="stat-value">{rewards.length ? fmtNum(rewards.reduce((a, b) => a + b, 0)) : '—'}</div>
            </div>
            <div className="stat">
              <div className="stat-label">Output tokens</div>
              <div className="stat-value">{fmtInt(tokensOut)}</div>
            </div>
            <div className="stat">
              <div className="stat-label">policy_version</div>
              <div className="stat-value mono">{versions.length ? versions.join(', ') : '—'}</div>
            </div>
            {first?.problem_id ? (
              <div className="stat">
                <div className="stat-label">problem_id</div>
                <div className="stat-value mono">{first.problem_id}</div>
              </div>
            ) : null}
            {first?.dataset ? (
              <div className="stat">
                <div className="stat-label">dataset</div>
                <div className="stat-value mono">{first.dataset}</div>
              </div>
            ) : null}
          </div>
          {first?.problem_text ? (
            <details className="turn-extra" open>
              <summary>problem_text</summary>
              <pre className="text">{first.problem_text}</pre>
            </details>
          ) : null}
          {data.truncated ? (
            <div className="banner banner-warn">
              This rollout has more than {fmtInt(MAX_ROLLOUT_RECORDS)} records; the first {fmtInt(MAX_ROLLOUT_RECORDS)} in
              listing order are shown.
            </div>
          ) : null}
          {turns.length === 0 ? (
            <p className="empty-panel" data-testid="rollout-empty">
              No records with rollout_id <span className="mono">{rolloutId}</span> in this store (base table or WAL).
            </p>
          ) : (
            <ol className="conversation" data-testid="conversation">
              {turns.map((r, i) => (
                <Turn key={r.id ?? `at:${i}`} store={name} record={r} />
              ))}
            </ol>
          )}
        </>
      ) : null}
    </section>
  );
}
