// check_index.mjs DIR NAME --id X [--column id]
//
// Proves a scalar index on `id` is present and answers lookups (e.g. after Go
// appends on top of a LanceDB-built BTree index).
// stdout: {"version": N,
//          "indices": [{"name","columns","indexType"}],
//          "index_stats": {"<name>": {"numIndexedRows","numUnindexedRows","indexType","numIndices"}},
//          "id": X, "where": "id = 'X'",
//          "count": countRows(where), "found_ids": [id of each matching row],
//          "uses_index": true if the query plan contains a ScalarIndexQuery}
import * as lancedb from "@lancedb/lancedb";
import { emit, indicesJSON, log, parseArgs, run, tableToRows } from "./lib.mjs";

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "check_index.mjs DIR NAME --id X [--column id]",
    flags: { id: "string", column: "string" },
  });
  const [dir, name] = args._;
  if (args.id === undefined) throw new Error("--id is required");
  const col = args.column ?? "id";
  const db = await lancedb.connect(dir);
  const table = await db.openTable(name);
  const indices = await indicesJSON(table);
  const indexStats = {};
  for (const ix of indices) indexStats[ix.name] = (await table.indexStats(ix.name)) ?? null;

  const where = `${col} = '${args.id.replaceAll("'", "''")}'`;
  const count = await table.countRows(where);
  const rows = tableToRows(await table.query().where(where).select([col]).toArrow());
  const plan = await table.query().where(where).select([col]).explainPlan(true);
  log(plan);
  emit({
    version: await table.version(),
    indices,
    index_stats: indexStats,
    id: args.id,
    where,
    count,
    found_ids: rows.map((r) => r[col]),
    uses_index: plan.includes("ScalarIndexQuery"),
  });
}

run(main);
