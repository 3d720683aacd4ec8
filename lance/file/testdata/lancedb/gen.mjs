// Regenerates the LanceDB-written reference files used by lancedb_test.go.
// Run from the repository root after `npm ci` in test/interop:
//
//   node lance/file/testdata/lancedb/gen.mjs
//
// For each case it creates a one-fragment table with LanceDB 0.31 at data
// storage version 2.0, copies the data file to CASE.lance, and writes what
// LanceDB itself reads back (query().toArrow()) as an Arrow IPC file,
// CASE.arrow. The Go test decodes CASE.lance and compares with CASE.arrow.
import { createRequire } from "node:module";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { arrow, rowsToBatch, dataFiles, footerVersion } from "../../../../test/interop/lib.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../../../test/interop/package.json"));
const lancedb = require("@lancedb/lancedb");

const f = (name, type, nullable = true) => new arrow.Field(name, type, nullable);
const fr = Math.fround;
const WORDS = ["héllo 世界 🚀", "", "plain", "tab\tnewline\n", "ñ"];
const CATS = ["alpha", "beta", "gamma", "delta", "epsilon"];

function bytes(len, seed) {
  const b = new Uint8Array(len);
  for (let j = 0; j < len; j++) b[j] = (j * 31 + seed * 7 + 13) & 255;
  return b;
}

const TYPES = new arrow.Schema([
  f("id", new arrow.Utf8(), false),
  f("cat", new arrow.Utf8()),
  f("s", new arrow.Utf8()),
  f("ls", new arrow.LargeUtf8()),
  f("bin", new arrow.Binary()),
  f("lbin", new arrow.LargeBinary()),
  f("i8", new arrow.Int8()),
  f("i16", new arrow.Int16()),
  f("i32", new arrow.Int32()),
  f("i64", new arrow.Int64()),
  f("u8", new arrow.Uint8()),
  f("u16", new arrow.Uint16()),
  f("u32", new arrow.Uint32()),
  f("u64", new arrow.Uint64()),
  f("f32", new arrow.Float32()),
  f("f64", new arrow.Float64()),
  f("flag", new arrow.Bool()),
  f("day", new arrow.DateDay()),
  f("ts", new arrow.TimestampMicrosecond("UTC")),
  f("tsn", new arrow.TimestampNanosecond()),
  f("lf", new arrow.List(f("item", new arrow.Float32()))),
  f("lstr", new arrow.List(f("item", new arrow.Utf8()))),
  f("vec", new arrow.FixedSizeList(4, f("item", new arrow.Float32()))),
  f("vec2", new arrow.FixedSizeList(2, f("item", new arrow.Float32())), false),
  f("null_i", new arrow.Int32()),
  f("null_s", new arrow.Utf8()),
  f("null_l", new arrow.List(f("item", new arrow.Int32()))),
  f("empty_l", new arrow.List(f("item", new arrow.Int32()))),
  f("st", new arrow.Struct([f("a", new arrow.Int32()), f("b", new arrow.Utf8())])),
  f("lst", new arrow.List(f("item", new arrow.Struct([f("x", new arrow.Float64()), f("y", new arrow.Utf8())])))),
]);

function typesRow(i) {
  const lf = i % 13 === 4 ? null : Array.from({ length: i % 5 }, (_, k) => fr(i + k / 8));
  return {
    id: `row-${i}`,
    cat: i % 23 === 0 ? null : CATS[(i * 3) % 5],
    s: i % 7 === 3 ? null : WORDS[i % WORDS.length] + (i % 4 === 0 ? "" : ` ${i}`),
    ls: i % 11 === 5 ? null : `large-${i}-` + "x".repeat(i % 17),
    bin: i % 9 === 1 ? null : bytes(i % 9, i),
    lbin: i % 7 === 2 ? null : bytes((i * 13) % 200, i + 1),
    i8: i % 5 === 0 ? null : ((i * 7) % 256) - 128,
    i16: i % 6 === 0 ? null : ((i * 977) % 65536) - 32768,
    i32: i % 8 === 0 ? null : (i * 7919) % 20001 - 10000,
    i64: i % 10 === 0 ? null : BigInt(i) * 1000000007n - 150000000000n,
    u8: i % 4 === 1 ? null : (i * 3) % 256,
    u16: (i * 601) % 65536,
    u32: i % 3 === 0 ? null : (i * 2654435761) % 4294967296,
    u64: i % 3 === 1 ? null : BigInt(i) * 18446744073709551n,
    f32: i % 9 === 0 ? null : fr(i * 0.25 - 37.5),
    f64: i % 37 === 0 ? null : i * 1.5 + 0.001,
    flag: i % 29 === 0 ? null : i % 3 === 0,
    day: i % 12 === 0 ? null : 19000 + i,
    ts: i % 11 === 5 ? null : 1700000000000000n + BigInt(i) * 1234567n,
    tsn: i % 10 === 5 ? null : 1700000000000000n + BigInt(i),
    lf,
    lstr: i % 6 === 1 ? null : Array.from({ length: i % 4 }, (_, k) => (k === 1 ? null : WORDS[(i + k) % WORDS.length])),
    vec: i % 10 === 3 ? null : [fr(i), fr(i + 0.5), fr(-i), fr(i / 3)],
    vec2: [fr(i), fr(2 * i)],
    null_i: null,
    null_s: null,
    null_l: null,
    empty_l: [],
    st: { a: i % 4 === 0 ? null : i, b: i % 5 === 0 ? null : `b${i}` },
    lst: i % 8 === 7 ? null : Array.from({ length: i % 3 }, (_, k) => ({ x: i + k / 4, y: k === 0 ? null : `y${i}.${k}` })),
  };
}

const PAGES = new arrow.Schema([
  f("id", new arrow.Utf8(), false),
  f("n", new arrow.Int64()),
  f("cat", new arrow.Utf8()),
  f("text", new arrow.LargeUtf8()),
  f("tok", new arrow.List(f("item", new arrow.Int32()))),
  f("vec", new arrow.FixedSizeList(3, f("item", new arrow.Float32()))),
  f("flag", new arrow.Bool()),
]);

function pagesRow(i) {
  return {
    id: `id-${i}`,
    n: i % 17 === 0 ? null : BigInt(i * i),
    cat: i % 31 === 0 ? null : CATS[i % 5],
    text: i % 13 === 0 ? null : "t".repeat(i % 50) + i,
    tok: i % 19 === 0 ? null : Array.from({ length: i % 7 }, (_, k) => i * 10 + k),
    vec: i % 23 === 0 ? null : [fr(i), fr(-i), fr(i / 7)],
    flag: i % 3 === 0 ? null : i % 2 === 0,
  };
}

async function makeCase(name, schema, rowFn, rows, env = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lancedb-ref-"));
  const saved = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  try {
    const batch = rowsToBatch(schema, Array.from({ length: rows }, (_, i) => rowFn(i)));
    const db = await lancedb.connect(tmp);
    const table = await db.createTable(name, new arrow.Table(schema, [batch]), {
      storageOptions: { new_table_data_storage_version: "2.0" },
    });
    const files = dataFiles(path.join(tmp, `${name}.lance`));
    if (files.length !== 1) throw new Error(`${name}: ${files.length} data files`);
    const [major, minor] = footerVersion(files[0]);
    if (major !== 0 || minor !== 3) throw new Error(`${name}: footer ${major}.${minor}`);
    fs.copyFileSync(files[0], path.join(here, `${name}.lance`));
    const back = await table.query().toArrow();
    fs.writeFileSync(path.join(here, `${name}.arrow`), arrow.tableToIPC(back, "file"));
    console.error(`${name}: ${rows} rows, ${fs.statSync(files[0]).size} bytes`);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await makeCase("types", TYPES, typesRow, 300);
await makeCase("pages", PAGES, pagesRow, 1200, { LANCE_FILE_WRITER_MAX_PAGE_BYTES: "1024" });
