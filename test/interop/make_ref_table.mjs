// make_ref_table.mjs DIR NAME [--rows N]
//
// LanceDB 0.31 creates the base table of a rollout store the way the
// reference system does: DIR/NAME.rollout.lance at data storage version 2.0,
// with the rollout columns, but `role` a dictionary<int8, utf8> and
// `created_at` a timestamp[us] without a time zone; `id` carries the
// unenforced primary key metadata. Two commits (createTable + add) give two
// fragments whose role dictionaries differ in content and order. It then
// registers the store as our catalog lists stores: an empty marker object
// DIR/_lc_stores/NAME.
//
// stdout: {"ok": true, "rows": N, "version": 2, "fragments": 2,
//          "footer_version": [0, 3], "schema": [...],
//          "records": [{id, rollout_id, role, created_at_us, sequence_order, content}]}
// (created_at_us: microseconds since the epoch, as a number)
import * as lancedb from "@lancedb/lancedb";
import fs from "node:fs";
import path from "node:path";
import { arrow, buildData, dataFiles, emit, footerVersion, log, parseArgs, run, schemaJSON } from "./lib.mjs";

const f = (name, type, nullable = true, md) => new arrow.Field(name, type, nullable, md);
const ROLE = new arrow.Dictionary(new arrow.Utf8(), new arrow.Int8());
const relation = new arrow.Struct([
  f("target_id", new arrow.Utf8()),
  f("relation", new arrow.Utf8()),
  f("weight", new arrow.Float32()),
]);
const PK = new Map([["lance-schema:unenforced-primary-key", "true"]]);

const SCHEMA = new arrow.Schema([
  f("id", new arrow.Utf8(), false, PK),
  f("rollout_id", new arrow.Utf8(), false),
  f("problem_id", new arrow.Utf8(), false),
  f("dataset", new arrow.Utf8()),
  f("sequence_order", new arrow.Int32(), false),
  f("role", ROLE, false),
  f("created_at", new arrow.TimestampMicrosecond(), false),
  f("content", new arrow.LargeUtf8()),
  f("content_type", new arrow.Utf8(), false),
  f("model_input_string", new arrow.LargeUtf8()),
  f("model_output_string", new arrow.LargeUtf8()),
  f("rationale", new arrow.LargeUtf8()),
  f("problem_text", new arrow.LargeUtf8()),
  f("user_metadata", new arrow.LargeUtf8()),
  f("input_tokens", new arrow.List(f("item", new arrow.Int32()))),
  f("output_tokens", new arrow.List(f("item", new arrow.Int32()))),
  f("num_input_tokens", new arrow.Int32()),
  f("num_output_tokens", new arrow.Int32()),
  f("output_logprobs", new arrow.List(f("item", new arrow.Float32()))),
  f("input_logprobs", new arrow.List(f("item", new arrow.Float32()))),
  f("ref_logprobs", new arrow.List(f("item", new arrow.Float32()))),
  f("loss_mask", new arrow.List(f("item", new arrow.Int8()))),
  f("advantage", new arrow.Float32()),
  f("reward", new arrow.Float32()),
  f("raw_reward", new arrow.Float32()),
  f("score", new arrow.Float32()),
  f("grader_id", new arrow.Utf8()),
  f("include_in_training", new arrow.Bool()),
  f("exclude_reason", new arrow.Utf8()),
  f("policy_version", new arrow.Utf8()),
  f("relationships", new arrow.List(f("item", relation))),
  f("binary_payload", new arrow.LargeBinary()),
  f("payload_size", new arrow.Int64()),
  f("payload_checksum", new arrow.Utf8()),
  f("artifact_type", new arrow.Utf8()),
  f("metadata", new arrow.LargeUtf8()),
]);

const ROLES = ["assistant", "tool", "grade", "artifact"];
const BASE_US = 1767225600000000n; // 2026-01-01T00:00:00Z

function makeRow(i) {
  return {
    id: `ref-${String(i).padStart(4, "0")}`,
    rollout_id: `rollout-${Math.floor(i / 3)}`,
    problem_id: `problem-${Math.floor(i / 6)}`,
    dataset: i % 2 === 0 ? "gsm8k" : null,
    sequence_order: i % 3,
    role: ROLES[(i * 3) % ROLES.length],
    created_at: BASE_US + BigInt(i) * 1000001n,
    content: `reference content ${i}`,
    content_type: "text/plain",
    input_tokens: [i, i + 1],
    num_input_tokens: 2,
    output_logprobs: i % 2 === 0 ? [-0.5, -0.25] : null,
    reward: i % 4 === 0 ? null : i / 4,
    include_in_training: i % 5 !== 0,
    relationships: i === 1 ? [{ target_id: "ref-0000", relation: "follows", weight: 1 }] : null,
    metadata: `{"step":${i}}`,
  };
}

// Build one batch: every column through lib.mjs buildData except the
// dictionary-encoded role, whose dictionary lists the roles in first-seen
// order of this batch (so the two fragments' dictionaries differ).
function batch(rows) {
  const children = SCHEMA.fields.map((fl) => {
    const vals = rows.map((r) => (r[fl.name] === undefined ? null : r[fl.name]));
    if (fl.name !== "role") return buildData(fl.type, vals, fl.name);
    const dict = [];
    const keys = new Int8Array(vals.length);
    vals.forEach((v, i) => {
      let k = dict.indexOf(v);
      if (k < 0) k = dict.push(v) - 1;
      keys[i] = k;
    });
    const dictionary = arrow.vectorFromArray(dict, new arrow.Utf8());
    return arrow.makeData({ type: ROLE, length: vals.length, nullCount: 0, data: keys, dictionary });
  });
  const data = arrow.makeData({ type: new arrow.Struct(SCHEMA.fields), length: rows.length, nullCount: 0, children });
  return new arrow.RecordBatch(SCHEMA, data);
}

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "make_ref_table.mjs DIR NAME [--rows N]",
    flags: { rows: "int" },
  });
  const [dir, name] = args._;
  const total = args.rows ?? 12;
  const half = Math.floor(total / 2);
  const rows = Array.from({ length: total }, (_, i) => makeRow(i));
  // The second batch in reverse order, so its role dictionary is ordered
  // differently from the first.
  const t1 = new arrow.Table(SCHEMA, [batch(rows.slice(0, half))]);
  const t2 = new arrow.Table(SCHEMA, [batch(rows.slice(half).reverse())]);

  fs.mkdirSync(dir, { recursive: true });
  const db = await lancedb.connect(dir);
  const tname = `${name}.rollout`;
  const table = await db.createTable(tname, t1, {
    mode: "create",
    storageOptions: { new_table_data_storage_version: "2.0" },
  });
  await table.add(t2);
  const count = await table.countRows();
  if (count !== total) throw new Error(`countRows=${count}, want ${total}`);

  const tableDir = path.join(dir, `${tname}.lance`);
  const files = dataFiles(tableDir);
  const versions = files.map((p) => footerVersion(p));
  for (const [k, v] of versions.entries()) {
    if (v[0] !== 0 || v[1] !== 3) throw new Error(`${files[k]}: footer version ${v}, want 0/3 (2.0)`);
  }
  // Register the store the way our catalog lists stores.
  fs.mkdirSync(path.join(dir, "_lc_stores"), { recursive: true });
  fs.writeFileSync(path.join(dir, "_lc_stores", name), "");

  const schema = await table.schema();
  log(`created ${tableDir}: ${count} rows, ${files.length} data files`);
  emit({
    ok: true,
    rows: count,
    version: await table.version(),
    fragments: (await table.stats()).fragmentStats.numFragments,
    footer_version: versions[0],
    schema: schemaJSON(schema),
    records: rows.map((r) => ({
      id: r.id,
      rollout_id: r.rollout_id,
      role: r.role,
      created_at_us: Number(r.created_at),
      sequence_order: r.sequence_order,
      content: r.content,
    })),
  });
}

run(main);
