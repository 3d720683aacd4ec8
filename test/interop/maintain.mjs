// maintain.mjs DIR NAME [--append FILE | --rows FILE] [--delete SQL] [--index] [--compact]
//              [--index-column COL]
//
// Runs the requested LanceDB maintenance steps, in this order, on an existing
// table (typically one the Go side wrote):
//   append : rows from a JSON-lines FILE (one object per line, keys = column
//            names, values in the JSON encoding of lib.mjs; binary as base64,
//            timestamps as integer microseconds, int64 as number or string;
//            missing keys are null), converted with the table's own schema
//   delete : table.delete(SQL)
//   index  : createIndex(COL, {config: Index.btree()}), COL defaults to "id"
//   compact: table.optimize() with default options: cleanupOlderThan is
//            7 days and deleteUnverified false, so no file younger than
//            7 days is removed. Also merges new rows into existing indices.
// With no step flag it only reports.
//
// stdout: {"count", "version", "indices": [{"name","columns","indexType"}],
//          "fragments": stats().fragmentStats.numFragments,
//          "data_file_versions": [[0, 3]]   (distinct footer versions in data/),
//          "steps": [{"step": "append"|"delete"|"index"|"compact", "version": N, ...}]}
// append adds "rows"; delete adds "deleted" (count before - count after);
// compact adds "compaction" {fragmentsRemoved, fragmentsAdded, filesRemoved,
// filesAdded} and "prune" {bytesRemoved, oldVersionsRemoved}.
import * as lancedb from "@lancedb/lancedb";
import fs from "node:fs";
import path from "node:path";
import { dataFiles, emit, footerVersion, indicesJSON, log, parseArgs, rowsToTable, run } from "./lib.mjs";

function readJSONLines(file) {
  const rows = [];
  fs.readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, k) => {
      if (line.trim() === "") return;
      try {
        rows.push(JSON.parse(line));
      } catch (e) {
        throw new Error(`${file}:${k + 1}: ${e.message}`);
      }
    });
  return rows;
}

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "maintain.mjs DIR NAME [--append FILE] [--delete SQL] [--index] [--compact]",
    flags: { append: "string", rows: "string", delete: "string", index: "bool", "index-column": "string", compact: "bool" },
  });
  const [dir, name] = args._;
  const appendFile = args.append ?? args.rows;
  const db = await lancedb.connect(dir);
  const table = await db.openTable(name);
  const steps = [];

  if (appendFile !== undefined) {
    const rows = readJSONLines(appendFile);
    const schema = await table.schema();
    const res = await table.add(rowsToTable(schema, rows));
    steps.push({ step: "append", version: res.version, rows: rows.length });
    log(`appended ${rows.length} rows -> version ${res.version}`);
  }
  if (args.delete !== undefined) {
    const before = await table.countRows();
    const res = await table.delete(args.delete);
    const after = await table.countRows();
    steps.push({ step: "delete", version: res.version, deleted: before - after });
    log(`deleted ${before - after} rows where ${args.delete} -> version ${res.version}`);
  }
  if (args.index) {
    const col = args["index-column"] ?? "id";
    await table.createIndex(col, { config: lancedb.Index.btree() });
    steps.push({ step: "index", version: await table.version(), column: col });
    log(`created btree index on ${col}`);
  }
  if (args.compact) {
    const st = await table.optimize();
    steps.push({ step: "compact", version: await table.version(), compaction: st.compaction, prune: st.prune });
    log(`optimize: ${JSON.stringify(st)}`);
  }

  const stats = await table.stats();
  emit({
    count: await table.countRows(),
    version: await table.version(),
    indices: await indicesJSON(table),
    fragments: stats.fragmentStats.numFragments,
    // distinct footer [major, minor] over every file in data/ ([0, 3] = 2.0)
    data_file_versions: [...new Set(dataFiles(path.join(dir, `${name}.lance`)).map((p) => footerVersion(p).join(".")))]
      .sort()
      .map((s) => s.split(".").map(Number)),
    steps,
  });
}

run(main);
