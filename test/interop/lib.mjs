// Shared helpers for the interop scripts: argument parsing, the JSON value
// encoding that the Go side compares against, and Arrow batch building.
//
// JSON value encoding (used by dump.mjs output, make_table.mjs expected.json,
// and accepted as input by maintain.mjs / append_loop.mjs):
//   null                      -> null
//   int8..int64, uint*        -> number if |v| <= 2^53-1, else decimal string
//   float16/32/64             -> number; NaN, +Inf, -Inf as "NaN", "Inf", "-Inf"
//                                (float32 values are widened to float64 exactly)
//   bool                      -> true/false
//   utf8 / large_utf8         -> string
//   binary / large_binary     -> {"len": N, "sha256": "<hex>"}   (output)
//                                base64 string                    (input)
//   timestamp[any unit]       -> integer MICROseconds since the Unix epoch
//                                (same number/string rule as int64; ns are
//                                floored to us)
//   date32 / date64           -> integer days / ms since epoch (number)
//   list / fixed_size_list    -> array of encoded items
//   struct                    -> object of encoded children
// LanceDB (CommonJS) require()s apache-arrow; an ESM `import` would load a
// second copy whose classes fail LanceDB's instanceof checks (e.g. LargeUtf8
// then hits "Unrecognized type id"). Always use this CJS instance.
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
export const arrow = require("apache-arrow");

// apache-arrow 18.1.0's IPC writer emits an EMPTY values buffer for a boolean
// column whose values are all null; arrow-rs (inside LanceDB) then rejects the
// batch ("Need at least 1 bytes for bitmap in buffers[0] ... Boolean"). Make
// it write the (zeroed) packed values instead by hiding the null count from
// that one check; the field node still records the real null count.
{
  const { VectorAssembler } = require("apache-arrow/visitor/vectorassembler");
  const visitBool = VectorAssembler.prototype.visitBool;
  VectorAssembler.prototype.visitBool = function (data) {
    if (data.length > 0 && data.nullCount >= data.length && data.values instanceof Uint8Array) {
      return visitBool.call(this, Object.create(data, { nullCount: { value: 0 } }));
    }
    return visitBool.call(this, data);
  };
}
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

// ---------------------------------------------------------------- process I/O

export function log(...args) {
  console.error(...args);
}

// Print exactly one JSON document on stdout.
export function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// Run main(), turning any exception into a message on stderr and exit code 1.
export function run(main) {
  main().then(
    // Flush stdout before exiting (the native module may keep the loop alive).
    () => process.stdout.write("", () => process.exit(0)),
    (err) => {
      console.error(`error: ${err && err.stack ? err.stack : err}`);
      process.exit(1);
    },
  );
}

// parseArgs(argv, {positional: 2, flags: {where: "string", "no-rows": "bool"}})
// Returns {_: [positional...], where: "...", "no-rows": true}.
export function parseArgs(argv, spec) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith("--")) {
      let key = a.slice(2);
      let val;
      const eq = key.indexOf("=");
      if (eq >= 0) {
        val = key.slice(eq + 1);
        key = key.slice(0, eq);
      }
      const kind = spec.flags[key];
      if (!kind) throw new Error(`unknown flag --${key}`);
      if (kind === "bool") {
        if (val !== undefined) throw new Error(`flag --${key} takes no value`);
        out[key] = true;
      } else {
        if (val === undefined) {
          if (i + 1 >= argv.length) throw new Error(`flag --${key} needs a value`);
          val = argv[++i];
        }
        if (kind === "int") {
          if (!/^-?\d+$/.test(val)) throw new Error(`flag --${key} needs an integer, got ${JSON.stringify(val)}`);
          val = Number(val);
        }
        out[key] = val;
      }
    } else {
      out._.push(a);
    }
  }
  if (spec.positional !== undefined && out._.length !== spec.positional) {
    throw new Error(`expected ${spec.positional} positional argument(s), got ${out._.length}: usage: ${spec.usage || ""}`);
  }
  return out;
}

// ---------------------------------------------------------------- type names

const TIME_UNIT = { 0: "s", 1: "ms", 2: "us", 3: "ns" };

// Arrow type as a pyarrow-style string, e.g. "int64", "string", "large_string",
// "timestamp[us, tz=UTC]", "list<item: float>", "fixed_size_list<item: float>[4]".
export function typeString(t) {
  const T = arrow.Type;
  switch (t.typeId) {
    case T.Null: return "null";
    case T.Bool: return "bool";
    case T.Int: return `${t.isSigned ? "" : "u"}int${t.bitWidth}`;
    case T.Float:
      return { 0: "halffloat", 1: "float", 2: "double" }[t.precision];
    case T.Utf8: return "string";
    case T.LargeUtf8: return "large_string";
    case T.Binary: return "binary";
    case T.LargeBinary: return "large_binary";
    case T.FixedSizeBinary: return `fixed_size_binary[${t.byteWidth}]`;
    case T.Timestamp:
      return t.timezone ? `timestamp[${TIME_UNIT[t.unit]}, tz=${t.timezone}]` : `timestamp[${TIME_UNIT[t.unit]}]`;
    case T.Date: return t.unit === arrow.DateUnit.DAY ? "date32[day]" : "date64[ms]";
    case T.Decimal: return `decimal${t.bitWidth}(${t.precision}, ${t.scale})`;
    case T.List: return `list<${t.children[0].name}: ${typeString(t.children[0].type)}>`;
    case T.FixedSizeList:
      return `fixed_size_list<${t.children[0].name}: ${typeString(t.children[0].type)}>[${t.listSize}]`;
    case T.Struct:
      return `struct<${t.children.map((c) => `${c.name}: ${typeString(c.type)}`).join(", ")}>`;
    case T.Dictionary: return `dictionary<values=${typeString(t.dictionary)}, indices=${typeString(t.indices)}>`;
    default: return String(t);
  }
}

export function schemaJSON(schema) {
  return schema.fields.map((f) => ({ name: f.name, type: typeString(f.type), nullable: f.nullable }));
}

// ---------------------------------------------------------------- encoding

export function encodeBigInt(v) {
  const b = BigInt(v);
  return b <= MAX_SAFE && b >= -MAX_SAFE ? Number(b) : b.toString();
}

export function encodeFloat(x) {
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "Inf";
  if (x === -Infinity) return "-Inf";
  return x;
}

export function encodeBytes(u8) {
  return { len: u8.length, sha256: crypto.createHash("sha256").update(u8).digest("hex") };
}

function floorDiv(a, b) {
  const q = a / b;
  return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q;
}

export function timestampToMicros(raw, unit) {
  const v = BigInt(raw);
  switch (unit) {
    case arrow.TimeUnit.SECOND: return v * 1000000n;
    case arrow.TimeUnit.MILLISECOND: return v * 1000n;
    case arrow.TimeUnit.MICROSECOND: return v;
    case arrow.TimeUnit.NANOSECOND: return floorDiv(v, 1000n);
    default: throw new Error(`unknown time unit ${unit}`);
  }
}

function isValid(data, i) {
  // i is relative to data (data.offset already applied by Data internals).
  if (data.type.typeId === arrow.Type.Null) return false;
  if (!data.nullBitmap || data.nullBitmap.length === 0 || data.nullCount === 0) return true;
  const j = data.offset + i;
  return ((data.nullBitmap[j >> 3] >> (j & 7)) & 1) === 1;
}

// Decode one arrow Data chunk into an array of JSON-encoded values.
// Reads raw buffers so int64/timestamps never lose precision. Arrow JS
// convention (see Data.slice): value/offset buffers are already sliced, so they
// are indexed by i; bit buffers (validity, bool values) by data.offset + i;
// fixed-size-list and struct children are already sliced with the parent.
export function decodeData(data) {
  const T = arrow.Type;
  const t = data.type;
  const n = data.length;
  const out = new Array(n);
  const off = data.offset;
  let vec = null;
  const getVec = () => (vec ||= arrow.makeVector(data));
  for (let i = 0; i < n; i++) {
    if (!isValid(data, i)) {
      out[i] = null;
      continue;
    }
    switch (t.typeId) {
      case T.Bool: {
        const j = off + i;
        out[i] = ((data.values[j >> 3] >> (j & 7)) & 1) === 1;
        break;
      }
      case T.Int:
        out[i] = t.bitWidth === 64 ? encodeBigInt(data.values[i]) : data.values[i];
        break;
      case T.Float:
        out[i] = t.precision === arrow.Precision.HALF ? encodeFloat(getVec().get(i)) : encodeFloat(data.values[i]);
        break;
      case T.Utf8:
      case T.LargeUtf8: {
        const s = Number(data.valueOffsets[i]);
        const e = Number(data.valueOffsets[i + 1]);
        out[i] = Buffer.from(data.values.buffer, data.values.byteOffset + s, e - s).toString("utf8");
        break;
      }
      case T.Binary:
      case T.LargeBinary: {
        const s = Number(data.valueOffsets[i]);
        const e = Number(data.valueOffsets[i + 1]);
        out[i] = encodeBytes(data.values.subarray(s, e));
        break;
      }
      case T.FixedSizeBinary: {
        const w = t.byteWidth;
        out[i] = encodeBytes(data.values.subarray(i * w, (i + 1) * w));
        break;
      }
      case T.Timestamp:
        out[i] = encodeBigInt(timestampToMicros(data.values[i], t.unit));
        break;
      case T.Date:
        out[i] = t.unit === arrow.DateUnit.DAY ? data.values[i] : encodeBigInt(data.values[i]);
        break;
      case T.List: {
        const s = Number(data.valueOffsets[i]);
        const e = Number(data.valueOffsets[i + 1]);
        out[i] = decodeData(data.children[0].slice(s, e - s));
        break;
      }
      case T.FixedSizeList: {
        const d = t.listSize;
        out[i] = decodeData(data.children[0].slice(i * d, d));
        break;
      }
      case T.Struct: {
        const o = {};
        t.children.forEach((c, k) => {
          o[c.name] = decodeData(data.children[k].slice(i, 1))[0];
        });
        out[i] = o;
        break;
      }
      case T.Dictionary: {
        const v = getVec().get(i);
        out[i] = v instanceof Uint8Array ? encodeBytes(v) : typeof v === "bigint" ? encodeBigInt(v) : v;
        break;
      }
      default: {
        const v = getVec().get(i);
        out[i] = typeof v === "bigint" ? encodeBigInt(v) : v;
      }
    }
    if (out[i] === undefined) throw new Error(`internal: decoded undefined at row ${i} of ${String(t)}`);
  }
  return out;
}

export function decodeVector(vector) {
  const out = [];
  for (const d of vector.data) for (const v of decodeData(d)) out.push(v);
  return out;
}

// Arrow table -> array of row objects in the JSON encoding.
export function tableToRows(table) {
  const names = table.schema.fields.map((f) => f.name);
  const cols = names.map((_, k) => decodeVector(table.getChildAt(k)));
  const rows = new Array(table.numRows);
  for (let r = 0; r < table.numRows; r++) {
    const o = {};
    names.forEach((nm, k) => (o[nm] = cols[k][r]));
    rows[r] = o;
  }
  return rows;
}

// Comparison for --order-by-col on encoded values: nulls last, numbers and
// int64 strings numerically, strings by UTF-8 bytes (same order as Go).
export function compareEncoded(a, b) {
  if (a === null || a === undefined) return b === null || b === undefined ? 0 : 1;
  if (b === null || b === undefined) return -1;
  const numLike = (x) => typeof x === "number" || (typeof x === "string" && /^-?\d+$/.test(x));
  if (typeof a === "number" && typeof b === "number") return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  if (numLike(a) && numLike(b) && (typeof a === "number" || typeof b === "number" || a.length > 15 || b.length > 15)) {
    const x = BigInt(typeof a === "number" ? Math.trunc(a) : a);
    const y = BigInt(typeof b === "number" ? Math.trunc(b) : b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (typeof a === "string" && typeof b === "string") return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
  const sa = JSON.stringify(a);
  const sb = JSON.stringify(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

// ---------------------------------------------------------------- building

function validity(values) {
  const n = values.length;
  const bm = new Uint8Array((n + 7) >> 3);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if (values[i] === null || values[i] === undefined) nulls++;
    else bm[i >> 3] |= 1 << (i & 7);
  }
  return { nullBitmap: nulls ? bm : undefined, nullCount: nulls };
}

function toBigInt(v, what) {
  if (typeof v === "bigint") return v;
  if (typeof v === "number") {
    if (!Number.isInteger(v)) throw new Error(`${what}: not an integer: ${v}`);
    return BigInt(v);
  }
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  throw new Error(`${what}: cannot convert ${JSON.stringify(v)} to an integer`);
}

function toFloat(v, what) {
  if (typeof v === "number") return v;
  if (v === "NaN") return NaN;
  if (v === "Inf" || v === "+Inf" || v === "Infinity") return Infinity;
  if (v === "-Inf" || v === "-Infinity") return -Infinity;
  if (typeof v === "string" && v.trim() !== "" && !Number.isNaN(Number(v))) return Number(v);
  throw new Error(`${what}: cannot convert ${JSON.stringify(v)} to a float`);
}

function toBytes(v, what) {
  if (v instanceof Uint8Array) return v;
  if (typeof v === "string") return new Uint8Array(Buffer.from(v, "base64"));
  if (Array.isArray(v)) return Uint8Array.from(v);
  throw new Error(`${what}: cannot convert ${JSON.stringify(v)} to bytes (want base64 string)`);
}

function microsToUnit(us, unit) {
  switch (unit) {
    case arrow.TimeUnit.SECOND: return floorDiv(us, 1000000n);
    case arrow.TimeUnit.MILLISECOND: return floorDiv(us, 1000n);
    case arrow.TimeUnit.MICROSECOND: return us;
    case arrow.TimeUnit.NANOSECOND: return us * 1000n;
    default: throw new Error(`unknown time unit ${unit}`);
  }
}

// Build an arrow Data for `type` from input values (JSON encoding, with
// bigint / Uint8Array also accepted). null/undefined -> null.
export function buildData(type, values, what = "value") {
  const T = arrow.Type;
  const n = values.length;
  const { nullBitmap, nullCount } = validity(values);
  const base = { type, length: n, nullCount, nullBitmap };
  switch (type.typeId) {
    case T.Null:
      return arrow.makeData({ type, length: n, nullCount: n });
    case T.Bool: {
      const data = new Uint8Array((n + 7) >> 3);
      values.forEach((v, i) => {
        if (v !== null && v !== undefined) {
          if (typeof v !== "boolean") throw new Error(`${what}: not a boolean: ${JSON.stringify(v)}`);
          if (v) data[i >> 3] |= 1 << (i & 7);
        }
      });
      return arrow.makeData({ ...base, data });
    }
    case T.Int: {
      const data = new type.ArrayType(n);
      values.forEach((v, i) => {
        if (v === null || v === undefined) return;
        if (type.bitWidth === 64) data[i] = toBigInt(v, what);
        else data[i] = Number(toBigInt(v, what));
      });
      return arrow.makeData({ ...base, data });
    }
    case T.Float: {
      if (type.precision === arrow.Precision.HALF) throw new Error(`${what}: float16 input not supported`);
      const data = new type.ArrayType(n);
      values.forEach((v, i) => {
        if (v !== null && v !== undefined) data[i] = toFloat(v, what);
      });
      return arrow.makeData({ ...base, data });
    }
    case T.Utf8:
    case T.LargeUtf8:
    case T.Binary:
    case T.LargeBinary: {
      const isStr = type.typeId === T.Utf8 || type.typeId === T.LargeUtf8;
      const large = type.typeId === T.LargeUtf8 || type.typeId === T.LargeBinary;
      const parts = values.map((v) => {
        if (v === null || v === undefined) return new Uint8Array(0);
        if (isStr) {
          if (typeof v !== "string") throw new Error(`${what}: not a string: ${JSON.stringify(v)}`);
          return new Uint8Array(Buffer.from(v, "utf8"));
        }
        return toBytes(v, what);
      });
      const total = parts.reduce((s, p) => s + p.length, 0);
      const data = new Uint8Array(total);
      const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
      let pos = 0;
      parts.forEach((p, i) => {
        data.set(p, pos);
        pos += p.length;
        offsets[i + 1] = large ? BigInt(pos) : pos;
      });
      if (!large && pos > 0x7fffffff) throw new Error(`${what}: more than 2 GiB in a 32-bit offset column`);
      return arrow.makeData({ ...base, data, valueOffsets: offsets });
    }
    case T.Timestamp: {
      const data = new BigInt64Array(n);
      values.forEach((v, i) => {
        if (v !== null && v !== undefined) data[i] = microsToUnit(toBigInt(v, what), type.unit);
      });
      return arrow.makeData({ ...base, data });
    }
    case T.Date: {
      const data = new type.ArrayType(n);
      values.forEach((v, i) => {
        if (v === null || v === undefined) return;
        data[i] = type.unit === arrow.DateUnit.DAY ? Number(toBigInt(v, what)) : toBigInt(v, what);
      });
      return arrow.makeData({ ...base, data });
    }
    case T.List: {
      const items = [];
      const offsets = new Int32Array(n + 1);
      values.forEach((v, i) => {
        if (v !== null && v !== undefined) {
          if (!Array.isArray(v)) throw new Error(`${what}: not an array: ${JSON.stringify(v)}`);
          for (const x of v) items.push(x);
        }
        offsets[i + 1] = items.length;
      });
      const child = buildData(type.children[0].type, items, `${what}[]`);
      return arrow.makeData({ ...base, valueOffsets: offsets, child });
    }
    case T.FixedSizeList: {
      const d = type.listSize;
      const items = new Array(n * d).fill(null);
      values.forEach((v, i) => {
        if (v === null || v === undefined) return;
        if (!Array.isArray(v) || v.length !== d) throw new Error(`${what}: want an array of ${d} items: ${JSON.stringify(v)}`);
        for (let k = 0; k < d; k++) items[i * d + k] = v[k];
      });
      const child = buildData(type.children[0].type, items, `${what}[]`);
      return arrow.makeData({ ...base, child });
    }
    case T.Struct: {
      const children = type.children.map((c) =>
        buildData(c.type, values.map((v) => (v === null || v === undefined ? null : v[c.name])), `${what}.${c.name}`),
      );
      return arrow.makeData({ ...base, children });
    }
    default:
      throw new Error(`${what}: building ${String(type)} is not supported`);
  }
}

// Rows (objects keyed by column name) -> arrow RecordBatch of `schema`.
// Missing keys are null. Unknown keys are an error.
export function rowsToBatch(schema, rows) {
  const names = new Set(schema.fields.map((f) => f.name));
  for (const r of rows) for (const k of Object.keys(r)) if (!names.has(k)) throw new Error(`row has unknown column ${k}`);
  const children = schema.fields.map((f) => {
    const vals = rows.map((r) => (r[f.name] === undefined ? null : r[f.name]));
    if (!f.nullable && vals.some((v) => v === null)) throw new Error(`column ${f.name} is not nullable but a row has no value`);
    return buildData(f.type, vals, f.name);
  });
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new arrow.RecordBatch(schema, data);
}

export function rowsToTable(schema, rows) {
  return new arrow.Table(schema, [rowsToBatch(schema, rows)]);
}

// ---------------------------------------------------------------- table info

export async function indicesJSON(table) {
  const idx = await table.listIndices();
  return idx.map((x) => ({ name: x.name, columns: x.columns, indexType: x.indexType }));
}

// Returns [major, minor] from the last 8 bytes of a Lance data file footer,
// or throws if the magic is not "LANC".
export function footerVersion(file) {
  const fd = fs.openSync(file, "r");
  try {
    const size = fs.fstatSync(fd).size;
    const b = Buffer.alloc(8);
    fs.readSync(fd, b, 0, 8, size - 8);
    if (b.subarray(4).toString("latin1") !== "LANC") throw new Error(`${file}: no LANC magic`);
    return [b.readUInt16LE(0), b.readUInt16LE(2)];
  } finally {
    fs.closeSync(fd);
  }
}

export function dataFiles(tableDir) {
  const d = path.join(tableDir, "data");
  if (!fs.existsSync(d)) return [];
  return fs.readdirSync(d).filter((f) => f.endsWith(".lance")).map((f) => path.join(d, f));
}

export function dirBytes(p) {
  let total = 0;
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.size;
  for (const e of fs.readdirSync(p)) total += dirBytes(path.join(p, e));
  return total;
}
