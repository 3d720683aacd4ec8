// scan.mjs DIR IN.arrow ROWS
//
// Creates a LanceDB 0.31 table (format 2.0) from the batches in IN.arrow and
// prints the mean time of a full scan, both as query().toArrow() and as the
// raw batch stream, as JSON. Used by TestCompareLanceDBScan.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../../../test/interop/package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const [dir, inp, rowsArg] = process.argv.slice(2);
const rows = Number(rowsArg);
const db = await lancedb.connect(dir);
const t = await db.createTable("r", arrow.tableFromIPC(fs.readFileSync(inp)), {
  storageOptions: { new_table_data_storage_version: "2.0" },
});
async function time(fn, n = 8) {
  await fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6 / n;
}
const toArrowMs = await time(async () => {
  const a = await t.query().toArrow();
  if (a.numRows !== rows) throw new Error(`${a.numRows} rows`);
});
const streamMs = await time(async () => {
  let n = 0;
  for await (const b of await t.query().execute()) n += b.numRows;
  if (n !== rows) throw new Error(`${n} rows`);
});
console.log(JSON.stringify({ toArrowMs, streamMs }));
