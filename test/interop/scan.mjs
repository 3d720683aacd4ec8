// scan.mjs DIR NAME [COLUMN...]: LanceDB 0.31 streams every row of
// DIR/NAME.lance (all columns, or the ones named) and prints
// {"rows", "secs", "rows_per_s"}: the baseline bench/feed compares the
// feed's catch-up rate with, on the same table.
import * as lancedb from "@lancedb/lancedb";
import { emit, run } from "./lib.mjs";

run(async () => {
  const [dir, name, ...cols] = process.argv.slice(2);
  if (!dir || !name) throw new Error("usage: scan.mjs DIR NAME [COLUMN...]");
  const db = await lancedb.connect(dir);
  const t = await db.openTable(name);
  let q = t.query();
  if (cols.length > 0) q = q.select(cols);
  const start = performance.now();
  let rows = 0;
  for await (const batch of q) rows += batch.numRows;
  const secs = (performance.now() - start) / 1000;
  emit({ rows, secs, rows_per_s: rows / secs });
});
