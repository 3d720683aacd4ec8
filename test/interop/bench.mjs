// bench.mjs DIR [--name bench] [--rows N] [--batch B]              (write + scan mode)
// bench.mjs DIR [--name bench] --one-row-commits N                 (N commits of 1 row)
// bench.mjs DIR [--name bench] --batched-commits N [--batch B]     (N commits of B rows)
//
// LanceDB 0.31 baseline for a rollout-shaped table, written at data storage
// version 2.0 (storageOptions new_table_data_storage_version = "2.0"):
//   id utf8 ("r-000000123"), rollout_id utf8 ("rollout-000001"),
//   text large_utf8 (pseudo-random printable ASCII, 896..1151 bytes, ~1 KB),
//   reward float32, score float64, step int64, created_at timestamp[us, UTC],
//   tokens list<int32> (56..71 items, ~64).
//
// Raw bytes (MB = 10^6 of these), the same definition on the Go side:
//   bytes(row) = len(id) + len(rollout_id) + len(text)      (UTF-8 bytes)
//              + 4 (reward) + 8 (score) + 8 (step) + 8 (created_at)
//              + 4 * len(tokens)
// Offsets, validity bitmaps and list offsets are not counted.
//
// Write mode: the table is created from the first batch of B rows (default
// 10,000) and each further batch is one table.add() commit, so the table has
// rows/B fragments. Batches are generated before their timed call;
// write_secs sums only the createTable/add calls (which include LanceDB's
// Arrow IPC serialisation). The scan is a streaming query over all columns
// (for await over table.query()), counting rows and summing raw bytes from
// the returned Arrow buffers with the formula above.
//   stdout: {"mode": "write_scan", "rows", "batch", "fragments", "bytes_on_disk",
//            "raw_bytes", "write_secs", "write_rows_per_s", "write_mb_per_s",
//            "scan_secs", "scan_rows", "scan_raw_bytes", "scan_rows_per_s", "scan_mb_per_s",
//            "footer_version": [0, 3]}
// DIR/NAME is dropped first if it exists.
// Commit modes create the table with one row first (not timed), then time
// N add() calls:
//   stdout: {"mode": "one_row_commits"|"batched_commits", "commits", "batch",
//            "rows", "secs", "commits_per_s", "rows_per_s", "mb_per_s", "version"}
import * as lancedb from "@lancedb/lancedb";
import fs from "node:fs";
import path from "node:path";
import { arrow, dataFiles, dirBytes, emit, footerVersion, log, parseArgs, run } from "./lib.mjs";

const f = (name, type, nullable = true) => new arrow.Field(name, type, nullable);
const SCHEMA = new arrow.Schema([
  f("id", new arrow.Utf8(), false),
  f("rollout_id", new arrow.Utf8()),
  f("text", new arrow.LargeUtf8()),
  f("reward", new arrow.Float32()),
  f("score", new arrow.Float64()),
  f("step", new arrow.Int64()),
  f("created_at", new arrow.TimestampMicrosecond("UTC")),
  f("tokens", new arrow.List(f("item", new arrow.Int32()))),
]);
const FIXED_BYTES_PER_ROW = 4 + 8 + 8 + 8;

// mulberry32: small deterministic PRNG.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// 4 MiB of printable ASCII; row texts are slices of it at random offsets.
const rnd = prng(42);
const POOL = new Uint8Array(4 << 20);
for (let i = 0; i < POOL.length; i++) POOL[i] = 32 + Math.floor(rnd() * 95);

function stringsData(type, strs) {
  const enc = strs.map((s) => Buffer.from(s, "utf8"));
  const total = enc.reduce((n, b) => n + b.length, 0);
  const large = type.typeId === arrow.Type.LargeUtf8;
  const offsets = large ? new BigInt64Array(strs.length + 1) : new Int32Array(strs.length + 1);
  const data = new Uint8Array(total);
  let pos = 0;
  enc.forEach((b, i) => {
    data.set(b, pos);
    pos += b.length;
    offsets[i + 1] = large ? BigInt(pos) : pos;
  });
  return { data: arrow.makeData({ type, length: strs.length, nullCount: 0, valueOffsets: offsets, data }), bytes: total };
}

// Rows [start, start+n) as one RecordBatch; returns {batch, rawBytes}.
function makeBatch(start, n) {
  const r = prng(start * 2654435761 + 1);
  const ids = [];
  const rollouts = [];
  for (let i = 0; i < n; i++) {
    const k = start + i;
    ids.push(`r-${String(k).padStart(9, "0")}`);
    rollouts.push(`rollout-${String(Math.floor(k / 100)).padStart(6, "0")}`);
  }
  const id = stringsData(SCHEMA.fields[0].type, ids);
  const rollout = stringsData(SCHEMA.fields[1].type, rollouts);

  // text: large_utf8, slices of POOL
  const lens = new Int32Array(n);
  let textTotal = 0;
  for (let i = 0; i < n; i++) {
    lens[i] = 896 + Math.floor(r() * 256);
    textTotal += lens[i];
  }
  const textBuf = new Uint8Array(textTotal);
  const textOff = new BigInt64Array(n + 1);
  let pos = 0;
  for (let i = 0; i < n; i++) {
    const at = Math.floor(r() * (POOL.length - lens[i]));
    textBuf.set(POOL.subarray(at, at + lens[i]), pos);
    pos += lens[i];
    textOff[i + 1] = BigInt(pos);
  }
  const text = arrow.makeData({ type: SCHEMA.fields[2].type, length: n, nullCount: 0, valueOffsets: textOff, data: textBuf });

  const reward = new Float32Array(n);
  const score = new Float64Array(n);
  const step = new BigInt64Array(n);
  const created = new BigInt64Array(n);
  const tokOff = new Int32Array(n + 1);
  let numTok = 0;
  for (let i = 0; i < n; i++) {
    const k = start + i;
    reward[i] = r() * 2 - 1;
    score[i] = r() * 100;
    step[i] = BigInt(k % 100);
    created[i] = 1700000000000000n + BigInt(k) * 1000n;
    numTok += 56 + Math.floor(r() * 16);
    tokOff[i + 1] = numTok;
  }
  const tok = new Int32Array(numTok);
  for (let j = 0; j < numTok; j++) tok[j] = Math.floor(r() * 50000);
  const tokens = arrow.makeData({
    type: SCHEMA.fields[7].type,
    length: n,
    nullCount: 0,
    valueOffsets: tokOff,
    child: arrow.makeData({ type: new arrow.Int32(), length: numTok, nullCount: 0, data: tok }),
  });
  const children = [
    id.data,
    rollout.data,
    text,
    arrow.makeData({ type: SCHEMA.fields[3].type, length: n, nullCount: 0, data: reward }),
    arrow.makeData({ type: SCHEMA.fields[4].type, length: n, nullCount: 0, data: score }),
    arrow.makeData({ type: SCHEMA.fields[5].type, length: n, nullCount: 0, data: step }),
    arrow.makeData({ type: SCHEMA.fields[6].type, length: n, nullCount: 0, data: created }),
    tokens,
  ];
  const batch = new arrow.RecordBatch(
    SCHEMA,
    arrow.makeData({ type: new arrow.Struct(SCHEMA.fields), length: n, nullCount: 0, children }),
  );
  const rawBytes = id.bytes + rollout.bytes + textTotal + FIXED_BYTES_PER_ROW * n + 4 * numTok;
  return { table: new arrow.Table(SCHEMA, [batch]), rawBytes };
}

// Raw bytes of a scanned batch, by the formula at the top.
function scannedBytes(batch) {
  let total = 0;
  for (const fld of batch.schema.fields) {
    const vec = batch.getChild(fld.name);
    for (const d of vec.data) {
      switch (fld.name) {
        case "id":
        case "rollout_id":
        case "text":
          total += Number(d.valueOffsets[d.length]) - Number(d.valueOffsets[0]);
          break;
        case "tokens":
          total += 4 * (Number(d.valueOffsets[d.length]) - Number(d.valueOffsets[0]));
          break;
        case "reward":
          total += 4 * d.length;
          break;
        default:
          total += 8 * d.length;
      }
    }
  }
  return total;
}

const CREATE_OPTS = { mode: "create", storageOptions: { new_table_data_storage_version: "2.0" } };

async function writeScan(db, dir, name, rows, batch) {
  let writeSecs = 0;
  let raw = 0;
  let table = null;
  for (let start = 0; start < rows; start += batch) {
    const { table: t, rawBytes } = makeBatch(start, Math.min(batch, rows - start));
    raw += rawBytes;
    const t0 = performance.now();
    if (table === null) table = await db.createTable(name, t, CREATE_OPTS);
    else await table.add(t);
    writeSecs += (performance.now() - t0) / 1000;
    if ((start / batch) % 10 === 9) log(`wrote ${start + batch} rows, ${writeSecs.toFixed(2)}s in LanceDB calls`);
  }
  const tableDir = path.join(dir, `${name}.lance`);
  const fv = footerVersion(dataFiles(tableDir)[0]);
  const fragments = (await table.stats()).fragmentStats.numFragments;

  // Fresh handle for the scan, so nothing is served from the writer's caches.
  const reader = await (await lancedb.connect(dir)).openTable(name);
  let scanRows = 0;
  let scanBytes = 0;
  const s0 = performance.now();
  for await (const b of reader.query()) {
    scanRows += b.numRows;
    scanBytes += scannedBytes(b);
  }
  const scanSecs = (performance.now() - s0) / 1000;
  if (scanRows !== rows) throw new Error(`scanned ${scanRows} rows, wrote ${rows}`);
  if (scanBytes !== raw) throw new Error(`scanned ${scanBytes} raw bytes, wrote ${raw}`);
  return {
    mode: "write_scan",
    rows,
    batch,
    fragments,
    bytes_on_disk: dirBytes(tableDir),
    raw_bytes: raw,
    write_secs: writeSecs,
    write_rows_per_s: rows / writeSecs,
    write_mb_per_s: raw / 1e6 / writeSecs,
    scan_secs: scanSecs,
    scan_rows: scanRows,
    scan_raw_bytes: scanBytes,
    scan_rows_per_s: scanRows / scanSecs,
    scan_mb_per_s: scanBytes / 1e6 / scanSecs,
    footer_version: fv,
  };
}

async function commits(db, name, n, batch, mode) {
  const table = await db.createTable(name, makeBatch(0, 1).table, CREATE_OPTS);
  // Pre-generate so only the commits are timed.
  const batches = [];
  let raw = 0;
  for (let i = 0; i < n; i++) {
    const b = makeBatch(1 + i * batch, batch);
    batches.push(b.table);
    raw += b.rawBytes;
  }
  const t0 = performance.now();
  for (const b of batches) await table.add(b);
  const secs = (performance.now() - t0) / 1000;
  return {
    mode,
    commits: n,
    batch,
    rows: n * batch,
    secs,
    commits_per_s: n / secs,
    rows_per_s: (n * batch) / secs,
    mb_per_s: raw / 1e6 / secs,
    version: await table.version(),
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 1,
    usage: "bench.mjs DIR [--name bench] [--rows N] [--batch B] [--one-row-commits N] [--batched-commits N]",
    flags: { name: "string", rows: "int", batch: "int", "one-row-commits": "int", "batched-commits": "int" },
  });
  const [dir] = args._;
  const name = args.name ?? "bench";
  fs.mkdirSync(dir, { recursive: true });
  const db = await lancedb.connect(dir);
  // Start from an empty table with no version history.
  if ((await db.tableNames()).includes(name)) await db.dropTable(name);
  let out;
  if (args["one-row-commits"] !== undefined) {
    out = await commits(db, name, args["one-row-commits"], 1, "one_row_commits");
  } else if (args["batched-commits"] !== undefined) {
    out = await commits(db, name, args["batched-commits"], args.batch ?? 1000, "batched_commits");
  } else {
    out = await writeScan(db, dir, name, args.rows ?? 1000000, args.batch ?? 10000);
  }
  log(JSON.stringify(out, null, 1));
  emit(out);
}

run(main);
