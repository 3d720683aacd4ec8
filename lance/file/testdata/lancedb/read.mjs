// read.mjs DIR NAME OUT.arrow [SKIP_IN_FILTER...]
//
// Opens table NAME in DIR with LanceDB 0.31, writes a full scan to OUT.arrow
// (an Arrow IPC stream: the file format cannot hold the per-batch
// dictionaries of dictionary-typed columns), then runs a filtered scan with limit/offset (late
// materialization) over every column except those listed. Used by
// TestLanceDBReadsOurFiles and wal's TestLanceDBReadsAGenerationSealedInPlace.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../../../test/interop/package.json"));
const lancedb = require("@lancedb/lancedb");
const arrow = require("apache-arrow");

const [dir, name, out, ...skip] = process.argv.slice(2);
const db = await lancedb.connect(dir);
const t = await db.openTable(name);
const n = await t.countRows();
const all = await t.query().toArrow();
if (all.numRows !== n) throw new Error(`scan returned ${all.numRows} of ${n} rows`);
fs.writeFileSync(out, arrow.tableToIPC(all, "stream"));
const cols = all.schema.fields.map((f) => f.name).filter((c) => !skip.includes(c));
// An integer id (the file tests) or a text one (a WAL generation's).
const idType = all.schema.fields.find((f) => f.name === "id").type;
const where = arrow.DataType.isInt(idType) ? "id % 7 = 3" : "id LIKE '%3'";
const some = await t.query().select(cols).where(where).limit(20).offset(5).toArrow();
if (some.numRows !== 20) throw new Error(`filtered scan returned ${some.numRows} rows`);
console.log(JSON.stringify({ rows: n, filtered: some.numRows }));
