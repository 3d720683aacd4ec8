// What the conversation view makes of a turn's text and numbers: tool-call JSON pretty-printed,
// logprob summaries. Pure functions (tested in turns.test.ts).

export type Segment = { kind: 'text'; text: string } | { kind: 'json'; value: unknown; label?: string };

/** Texts longer than this are shown as they are (parsing them on every render would cost too much). */
export const MAX_JSON_CHARS = 256 * 1024;

function parseJsonish(s: string): { ok: true; value: unknown } | { ok: false } {
  const t = s.trim();
  if (!(t.startsWith('{') && t.endsWith('}')) && !(t.startsWith('[') && t.endsWith(']'))) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(t) as unknown };
  } catch {
    return { ok: false };
  }
}

/** A JSON value with strings that hold JSON objects or arrays (a tool call's "arguments", say) parsed
 * into values, so the whole call prints as one indented tree. Depth-bounded. */
export function expandJsonStrings(v: unknown, depth = 0): unknown {
  if (depth > 8) return v;
  if (typeof v === 'string') {
    if (v.length > MAX_JSON_CHARS) return v;
    const p = parseJsonish(v);
    return p.ok ? expandJsonStrings(p.value, depth + 1) : v;
  }
  if (Array.isArray(v)) return v.map((x) => expandJsonStrings(x, depth + 1));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = expandJsonStrings(x, depth + 1);
    return out;
  }
  return v;
}

// Blocks a model writes tool calls in: <tool_call>…</tool_call> (and <tool_response>, <function_call>),
// and ``` fences (```json or bare).
const BLOCK = /<(tool_call|tool_response|function_call|tool_result)>([\s\S]*?)<\/\1>|```(?:json)?[ \t]*\n([\s\S]*?)```/g;

/** Splits a turn's text into plain text and JSON: the whole text when it is one JSON object or array
 * (a tool turn, or a structured tool call), else each tool-call tag or code fence whose body is JSON.
 * Strings inside that hold JSON are parsed too. Text that is not JSON stays as it is. */
export function splitJson(text: string): Segment[] {
  if (!text) return [];
  if (text.length > MAX_JSON_CHARS) return [{ kind: 'text', text }];
  const whole = parseJsonish(text);
  if (whole.ok) return [{ kind: 'json', value: expandJsonStrings(whole.value) }];
  const out: Segment[] = [];
  let last = 0;
  for (const m of text.matchAll(BLOCK)) {
    const body = m[2] ?? m[3] ?? '';
    const p = parseJsonish(body);
    if (!p.ok) continue;
    const at = m.index ?? 0;
    if (at > last) out.push({ kind: 'text', text: text.slice(last, at) });
    out.push({ kind: 'json', value: expandJsonStrings(p.value), label: m[1] });
    last = at + m[0].length;
  }
  if (!out.length) return [{ kind: 'text', text }];
  if (last < text.length) out.push({ kind: 'text', text: text.slice(last) });
  return out.filter((s) => s.kind === 'json' || s.text.trim() !== '');
}

export interface LogprobStats {
  /** Tokens with a finite logprob. */
  n: number;
  mean: number;
  min: number;
  /** exp(-mean): the perplexity of the tokens. */
  perplexity: number;
}

/** Summary of a logprob array; undefined when it holds no finite number. */
export function logprobStats(lps: readonly unknown[] | null | undefined): LogprobStats | undefined {
  if (!Array.isArray(lps)) return undefined;
  let n = 0;
  let sum = 0;
  let min = Number.POSITIVE_INFINITY;
  for (const v of lps) {
    if (typeof v !== 'number' || !Number.isFinite(v)) continue;
    n++;
    sum += v;
    if (v < min) min = v;
  }
  if (!n) return undefined;
  const mean = sum / n;
  return { n, mean, min, perplexity: Math.exp(-mean) };
}

/** The shade of a token by its probability: 0 (certain, p = 1) to 4 (p < 0.1). */
export function logprobLevel(lp: number): number {
  const p = Math.exp(lp);
  if (p >= 0.9) return 0;
  if (p >= 0.7) return 1;
  if (p >= 0.4) return 2;
  if (p >= 0.1) return 3;
  return 4;
}
