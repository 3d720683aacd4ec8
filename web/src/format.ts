// Display helpers.

const nf = new Intl.NumberFormat('en-US');

export function fmtInt(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return nf.format(v);
}

export function fmtNum(v: number | null | undefined): string {
  if (v === null || v === undefined) return '—';
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return nf.format(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e7)) return v.toExponential(3);
  return String(Number(v.toPrecision(6)));
}

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** A duration in seconds as "<1s", "42s", "3m 5s", "2h 10m", "4d 3h"; "—" when absent or not positive. */
export function fmtDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds <= 0) return '—';
  if (seconds < 1) return '<1s';
  const t = Math.floor(seconds);
  if (t < 60) return `${t}s`;
  if (t < 3600) return `${Math.floor(t / 60)}m ${t % 60}s`;
  if (t < 86400) return `${Math.floor(t / 3600)}h ${Math.floor((t % 3600) / 60)}m`;
  return `${Math.floor(t / 86400)}d ${Math.floor((t % 86400) / 3600)}h`;
}

export function parseTime(s: string | null | undefined): Date | undefined {
  if (!s) return undefined;
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** "12s ago", "5m ago", "3h ago", "2d ago"; absolute date beyond 30 days. */
export function relTime(s: string | null | undefined, now: number = Date.now()): string {
  const d = parseTime(s);
  if (!d) return '—';
  const sec = Math.round((now - d.getTime()) / 1000);
  const future = sec < 0;
  const a = Math.abs(sec);
  let out: string;
  if (a < 5) return 'just now';
  if (a < 60) out = `${a}s`;
  else if (a < 3600) out = `${Math.floor(a / 60)}m`;
  else if (a < 86400) out = `${Math.floor(a / 3600)}h`;
  else if (a < 30 * 86400) out = `${Math.floor(a / 86400)}d`;
  else return d.toISOString().slice(0, 10);
  return future ? `in ${out}` : `${out} ago`;
}

/** Absolute time for tooltips: local time plus the raw value. */
export function absTime(s: string | null | undefined): string {
  const d = parseTime(s);
  if (!d) return s ?? '';
  return `${d.toLocaleString()} (${s})`;
}

/** Compact timestamp for tables: "2024-05-01 12:34:56.789" in UTC. */
export function shortTime(s: string | null | undefined): string {
  const d = parseTime(s);
  if (!d) return s ?? '—';
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

export function preview(s: unknown, max = 80): string {
  if (s === null || s === undefined) return '';
  const t = (typeof s === 'string' ? s : JSON.stringify(s)).replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** "[n] a, b, c, … " for number arrays. */
export function compactArray(a: unknown[], max = 16): string {
  const items = a
    .slice(0, max)
    .map((v) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : fmtNum(v)) : JSON.stringify(v)));
  return `${items.join(', ')}${a.length > max ? ', …' : ''}`;
}

/** A task's run time: "320 ms", "4.2 s", then as fmtDuration ("3m 5s"). */
export function fmtMillis(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  return fmtDuration(ms / 1000);
}
