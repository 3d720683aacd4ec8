// append_loop.mjs DIR NAME --n N --prefix P [--row-json JSON] [--wait-for FILE]
//
// Appends N single-row commits, one at a time, to an existing table: a
// LanceDB committer to race against Go committers. Row i has id = "P-i";
// every other column comes from the --row-json template (an object in the
// JSON encoding of lib.mjs) or is null (so other columns must be nullable
// unless the template fills them). --wait-for FILE: poll until FILE exists
// before the first commit (a start barrier for the Go harness).
// stdout: {"versions": [version after each commit], "ids": ["P-0", ...],
//          "secs": wall time of the commit loop}
import * as lancedb from "@lancedb/lancedb";
import fs from "node:fs";
import { emit, log, parseArgs, rowsToTable, run } from "./lib.mjs";

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "append_loop.mjs DIR NAME --n N --prefix P [--row-json JSON] [--wait-for FILE]",
    flags: { n: "int", prefix: "string", "row-json": "string", "wait-for": "string" },
  });
  const [dir, name] = args._;
  if (args.n === undefined || args.prefix === undefined) throw new Error("--n and --prefix are required");
  const template = args["row-json"] !== undefined ? JSON.parse(args["row-json"]) : {};
  const db = await lancedb.connect(dir);
  const table = await db.openTable(name);
  const schema = await table.schema();
  if (args["wait-for"] !== undefined) {
    while (!fs.existsSync(args["wait-for"])) await new Promise((r) => setTimeout(r, 5));
  }
  const versions = [];
  const ids = [];
  const t0 = performance.now();
  for (let i = 0; i < args.n; i++) {
    const id = `${args.prefix}-${i}`;
    const res = await table.add(rowsToTable(schema, [{ ...template, id }]));
    versions.push(res.version);
    ids.push(id);
  }
  const secs = (performance.now() - t0) / 1000;
  log(`append_loop ${name}: ${args.n} commits in ${secs.toFixed(3)}s, last version ${versions.at(-1)}`);
  emit({ versions, ids, secs });
}

run(main);
