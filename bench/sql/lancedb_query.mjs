// lancedb_query.mjs DIR --q groupby|topk [--runs 3] [--name bench.rollout]
//
// LanceDB 0.31's own query of the table the Go harness wrote (DIR/NAME is
// the store's base table, a Lance dataset). LanceDB has no SQL GROUP BY or
// ORDER BY: it scans with its projection (and, for topk, its filter)
// pushed down, and the script aggregates or keeps the top 20 on the
// streamed batches, which is what a LanceDB user writes for these queries.
//   groupby: select(policy_version, reward) -> mean(reward), count by policy_version
//   topk:    where("reward > 0.99").select(id, policy_version, reward) -> top 20 by reward DESC, id
// stdout: {"engine": "lancedb", "query", "rows_scanned", "secs": [...], "best_secs",
//          "median_secs", "peak_rss_mb" (VmHWM), "result_head"}
import fs from "node:fs";
import { createRequire } from "node:module";
import { emit, log, parseArgs, run } from "../../test/interop/lib.mjs";

const require = createRequire(new URL("../../test/interop/package.json", import.meta.url));
const lancedb = require("@lancedb/lancedb");

function peakRSSMB() {
  try {
    const m = fs.readFileSync("/proc/self/status", "utf8").match(/VmHWM:\s+(\d+)/);
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

async function groupby(table) {
  const acc = new Map();
  let scanned = 0;
  for await (const b of table.query().select(["policy_version", "reward"])) {
    const pv = b.getChild("policy_version");
    const rw = b.getChild("reward");
    scanned += b.numRows;
    for (let i = 0; i < b.numRows; i++) {
      const r = rw.get(i);
      const k = pv.get(i);
      let a = acc.get(k);
      if (!a) acc.set(k, (a = { sum: 0, nr: 0, n: 0 }));
      a.n++;
      if (r !== null) {
        a.sum += r;
        a.nr++;
      }
    }
  }
  const rows = [...acc.entries()].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))
    .map(([k, a]) => [k, a.nr ? a.sum / a.nr : null, a.n]);
  return { scanned, rows };
}

async function topk(table) {
  let top = [];
  let scanned = 0;
  for await (const b of table.query().where("reward > 0.99").select(["id", "policy_version", "reward"])) {
    const id = b.getChild("id");
    const pv = b.getChild("policy_version");
    const rw = b.getChild("reward");
    scanned += b.numRows;
    for (let i = 0; i < b.numRows; i++) top.push([id.get(i), pv.get(i), rw.get(i)]);
    if (top.length > 1000) top = sortTop(top).slice(0, 20);
  }
  return { scanned, rows: sortTop(top).slice(0, 20) };
}

function sortTop(rows) {
  return rows.sort((x, y) => y[2] - x[2] || (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
}

run(async () => {
  const args = {
    q: "groupby", runs: 3, name: "bench.rollout",
    ...parseArgs(process.argv.slice(2), {
      positional: 1, usage: "lancedb_query.mjs DIR --q groupby|topk [--runs N] [--name T]",
      flags: { q: "string", runs: "int", name: "string" },
    }),
  };
  const dir = args._[0];
  const fn = { groupby, topk }[args.q];
  if (!fn) throw new Error(`unknown query ${args.q}`);
  const secs = [];
  let res;
  for (let i = 0; i < Number(args.runs); i++) {
    const t0 = process.hrtime.bigint();
    const table = await (await lancedb.connect(dir)).openTable(args.name);
    res = await fn(table);
    secs.push(Number(process.hrtime.bigint() - t0) / 1e9);
    log(`run ${i}: ${secs[i]} s`);
  }
  const sorted = [...secs].sort((a, b) => a - b);
  emit({
    engine: "lancedb-0.31", query: args.q, rows_scanned: res.scanned, secs, best_secs: sorted[0],
    median_secs: sorted[Math.floor(sorted.length / 2)], peak_rss_mb: peakRSSMB(), result_head: res.rows.slice(0, 3),
  });
});
