// dump.mjs DIR NAME [--where SQL] [--columns a,b,c] [--limit N] [--offset N]
//          [--version V] [--order-by-col COL] [--no-rows] [--with-row-id]
//
// Opens DIR/NAME.lance with LanceDB and reports what it sees.
// stdout: {"count": countRows(where), "version": N,
//          "schema": [{"name", "type", "nullable"}],      (type: pyarrow-style string, lib.mjs)
//          "indices": [{"name", "columns", "indexType"}],
//          "fragments": N,
//          "rows": [{col: value, ...}]}                   (omitted with --no-rows)
// Rows are in LanceDB's scan order, or sorted client-side by --order-by-col
// (nulls last, strings by UTF-8 bytes). Values use the JSON encoding of lib.mjs.
// "schema" is the table schema; with --columns the rows hold only those columns.
import * as lancedb from "@lancedb/lancedb";
import { compareEncoded, emit, indicesJSON, log, parseArgs, run, schemaJSON, tableToRows } from "./lib.mjs";

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "dump.mjs DIR NAME [--where SQL] [--columns a,b] [--limit N] [--offset N] [--version V] [--order-by-col COL] [--no-rows]",
    flags: {
      where: "string",
      columns: "string",
      limit: "int",
      offset: "int",
      version: "int",
      "order-by-col": "string",
      "no-rows": "bool",
      "with-row-id": "bool",
    },
  });
  const [dir, name] = args._;
  const db = await lancedb.connect(dir);
  const table = await db.openTable(name);
  if (args.version !== undefined) await table.checkout(args.version);

  const out = {
    count: await table.countRows(args.where),
    version: await table.version(),
    schema: schemaJSON(await table.schema()),
    indices: await indicesJSON(table),
    fragments: (await table.stats()).fragmentStats.numFragments,
  };

  if (!args["no-rows"]) {
    let q = table.query();
    if (args.where !== undefined) q = q.where(args.where);
    if (args.columns !== undefined) q = q.select(args.columns.split(",").map((c) => c.trim()).filter((c) => c));
    if (args.limit !== undefined) q = q.limit(args.limit);
    if (args.offset !== undefined) q = q.offset(args.offset);
    if (args["with-row-id"]) q = q.withRowId();
    const at = await q.toArrow();
    let rows = tableToRows(at);
    const col = args["order-by-col"];
    if (col !== undefined) {
      if (!at.schema.fields.some((f) => f.name === col)) throw new Error(`--order-by-col ${col}: no such column in the result`);
      rows = rows.map((r, k) => [r, k]).sort((a, b) => compareEncoded(a[0][col], b[0][col]) || a[1] - b[1]).map((x) => x[0]);
    }
    out.rows = rows;
    log(`dump ${name}: ${rows.length} rows (count ${out.count}), version ${out.version}`);
  }
  emit(out);
}

run(main);
