// make_table.mjs DIR NAME [--rows N]
//
// LanceDB 0.31 creates DIR/NAME.lance at data storage version 2.0 with
// deterministic content in two commits (createTable + add -> 2 fragments),
// checks every data file footer is 0/3 ("2.0"), and writes the expected rows
// (JSON value encoding of lib.mjs, ordered by id) to DIR/NAME.expected.json.
//
// stdout: {"ok": true, "rows": 300, "version": 2, "fragments": 2,
//          "footer_version": [0, 3], "data_files": 2, "expected": "NAME.expected.json"}
import * as lancedb from "@lancedb/lancedb";
import fs from "node:fs";
import path from "node:path";
import { arrow, dataFiles, encodeBigInt, encodeBytes, encodeFloat, emit, footerVersion, log, parseArgs, rowsToTable, run, schemaJSON, tableToRows } from "./lib.mjs";

const f = (name, type, nullable = true) => new arrow.Field(name, type, nullable);
const SCHEMA = new arrow.Schema([
  f("id", new arrow.Utf8(), false),
  f("i32", new arrow.Int32()),
  f("i64", new arrow.Int64()),
  f("f32", new arrow.Float32()),
  f("f64", new arrow.Float64()),
  f("flag", new arrow.Bool()),
  f("s", new arrow.Utf8()),
  f("ls", new arrow.LargeUtf8()),
  f("cat", new arrow.Utf8()),
  f("bin", new arrow.Binary()),
  f("lbin", new arrow.LargeBinary()),
  f("ts", new arrow.TimestampMicrosecond("UTC")),
  f("lf", new arrow.List(f("item", new arrow.Float32()))),
  f("li", new arrow.List(f("item", new arrow.Int32()))),
  f("vec", new arrow.FixedSizeList(4, f("item", new arrow.Float32()))),
]);

const STRINGS = ["héllo 世界 🚀", "", "plain ascii", null, 'tab\tnewline\n"quote" \\ back'];
const CATS = ["alpha", "beta", "gamma", "delta", "epsilon"];

function bytes(len, seed) {
  const b = new Uint8Array(len);
  for (let j = 0; j < len; j++) b[j] = (j * 31 + seed * 7 + 13) & 255;
  return b;
}

// Row i of the deterministic table. Values are native (bigint, Uint8Array)
// and go through rowsToTable; expected.json is produced by decoding the same
// Arrow batch, so the two cannot drift apart.
function makeRow(i) {
  const fr = Math.fround;
  let i32 = ((i * 7919) % 20001) - 10000;
  if (i === 0) i32 = -2147483648;
  if (i === 1) i32 = 2147483647;
  let i64 = BigInt(i) * 1000000007n - 150000000000n;
  if (i === 2) i64 = 9223372036854775807n;
  if (i === 3) i64 = -9223372036854775808n;
  if (i === 4) i64 = 9007199254740993n; // 2^53 + 1
  if (i % 50 === 17) i64 = null;
  let f32 = fr(i * 0.25 - 37.5);
  if (i === 5) f32 = NaN;
  if (i === 6) f32 = Infinity;
  if (i === 7) f32 = -Infinity;
  if (i === 9) f32 = fr(1 / 3);
  let f64 = i * 1.5 + 0.001;
  if (i % 37 === 0) f64 = null;
  if (i === 10) f64 = Math.PI;
  if (i === 11) f64 = -1e300;
  const flag = i % 29 === 0 ? null : i % 3 === 0;
  let s = STRINGS[i % STRINGS.length];
  if (s === "plain ascii") s = `plain ascii ${i}`;
  const ls = i === 100 ? "L".repeat(5000) : `large-${i}-` + "x".repeat(i % 17);
  const cat = i % 23 === 0 ? null : CATS[(i * 3) % 5];
  const bin = bytes(i % 9, i);
  let lbin = bytes(((i * 13) % 200) + 1, i + 1);
  if (i % 7 === 2) lbin = null;
  if (i % 7 === 3) lbin = new Uint8Array(0);
  if (i === 150) lbin = bytes(70000, 150);
  let ts = 1700000000000000n + BigInt(i) * 1234567n;
  if (i % 11 === 5) ts = null;
  if (i === 8) ts = -1234567n; // before the epoch, not ms-aligned
  let lf = [];
  for (let k = 0; k < (i % 6) + 1; k++) lf.push(fr(i + k / 8));
  if (i % 13 === 4) lf = null;
  if (i % 13 === 5) lf = [];
  let li = [];
  for (let k = 0; k < i % 4; k++) li.push(i * 10 + k);
  if (i % 17 === 9) li = null;
  let vec = [0, 1, 2, 3].map((k) => fr(i * 0.5 + k));
  if (i % 19 === 6) vec = null;
  return {
    id: `row-${String(i).padStart(5, "0")}`,
    i32, i64, f32, f64, flag, s, ls, cat, bin, lbin, ts, lf, li, vec,
  };
}

// JSON value encoding of a native generator value (see lib.mjs).
function encodeNative(v) {
  if (v === null) return null;
  if (typeof v === "bigint") return encodeBigInt(v);
  if (typeof v === "number") return encodeFloat(v);
  if (v instanceof Uint8Array) return encodeBytes(v);
  if (Array.isArray(v)) return v.map(encodeNative);
  return v;
}

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "make_table.mjs DIR NAME [--rows N]",
    flags: { rows: "int" },
  });
  const [dir, name] = args._;
  const total = args.rows ?? 300;
  const half = Math.floor(total / 2);
  const rows = Array.from({ length: total }, (_, i) => makeRow(i));
  const t1 = rowsToTable(SCHEMA, rows.slice(0, half));
  const t2 = rowsToTable(SCHEMA, rows.slice(half));

  fs.mkdirSync(dir, { recursive: true });
  // In 0.31.0 the data storage version is chosen per table via storageOptions
  // (the deprecated dataStorageVersion option maps to the same key).
  const db = await lancedb.connect(dir);
  const table = await db.createTable(name, t1, {
    mode: "create",
    storageOptions: { new_table_data_storage_version: "2.0" },
  });
  await table.add(t2);
  const version = await table.version();
  const count = await table.countRows();
  if (count !== total) throw new Error(`countRows=${count}, want ${total}`);

  const tableDir = path.join(dir, `${name}.lance`);
  const files = dataFiles(tableDir);
  const versions = files.map((p) => footerVersion(p));
  for (const [k, v] of versions.entries()) {
    if (v[0] !== 0 || v[1] !== 3) throw new Error(`${files[k]}: footer version ${v}, want 0/3 (2.0)`);
  }
  const stats = await table.stats();

  // Expected rows: decode the exact Arrow data we handed to LanceDB.
  const expected = [...tableToRows(t1), ...tableToRows(t2)];
  // Self-check: the decoder must agree with a direct encoding of the inputs.
  const direct = rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, encodeNative(v)])));
  const a = JSON.stringify(direct);
  const b = JSON.stringify(expected);
  if (a !== b) throw new Error("internal: decoded rows differ from the generated rows");
  const expectedPath = path.join(dir, `${name}.expected.json`);
  // One row per line so diffs stay readable.
  const text = `{"schema": ${JSON.stringify(schemaJSON(SCHEMA))},\n"rows": [\n${expected.map((r) => JSON.stringify(r)).join(",\n")}\n]}\n`;
  fs.writeFileSync(expectedPath, text);
  log(`created ${tableDir}: ${count} rows, version ${version}, ${files.length} data files`);

  emit({
    ok: true,
    rows: count,
    version,
    fragments: stats.fragmentStats.numFragments,
    footer_version: versions[0],
    data_files: files.length,
    expected: path.basename(expectedPath),
  });
}

run(main);
