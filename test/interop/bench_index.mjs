// bench_index.mjs DIR NAME --probes FILE [--calls N] [--calls-noindex N] [--columns id,rollout_id,problem_id]
//
// The LanceDB 0.31 side of `bench/scale`: on table DIR/NAME (which has no
// index), times key lookups without an index, builds LanceDB's own BTree
// indexes on the columns, and times them again.
// FILE: {"ids": [...], "rollouts": [...], "problems": [...]}.
// stdout: {"rows", "without": {...}, "index_build_secs", "with": {...}} where
// each {...} has get_p50_ms, get_p99_ms, trajectory_p50_ms, rollout_page_p50_ms
// (25 rows where rollout_id = …), filtered_p50_ms (25 rows where problem_id = …),
// page_p50_ms, uses_index (whether id = '…' is planned on a scalar index).
import fs from "node:fs";
import * as lancedb from "@lancedb/lancedb";
import { emit, log, parseArgs, run } from "./lib.mjs";

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : null;
}

async function timed(fn) {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

const q = (s) => `'${s.replaceAll("'", "''")}'`;
const listCols = ["id", "rollout_id", "problem_id", "sequence_order", "role", "content"];

async function measure(table, probes, calls) {
  const get = [], traj = [], roPage = [], filt = [], page = [];
  for (let i = 0; i < calls; i++) {
    const id = probes.ids[i % probes.ids.length];
    get.push(await timed(async () => {
      const r = await table.query().where(`id = ${q(id)}`).limit(1).toArray();
      if (r.length !== 1) throw new Error(`id ${id}: ${r.length} rows`);
    }));
    const ro = probes.rollouts[i % probes.rollouts.length];
    traj.push(await timed(() => table.query().where(`rollout_id = ${q(ro)}`).select(listCols).toArray()));
    roPage.push(await timed(() => table.query().where(`rollout_id = ${q(ro)}`).select(listCols).limit(25).toArray()));
    const p = probes.problems[i % probes.problems.length];
    filt.push(await timed(() => table.query().where(`problem_id = ${q(p)}`).select(listCols).limit(25).toArray()));
    page.push(await timed(() => table.query().select(listCols).limit(25).offset(i * 25).toArray()));
  }
  const plan = await table.query().where(`id = ${q(probes.ids[0])}`).limit(1).explainPlan(true);
  return {
    calls,
    get_p50_ms: pct(get, 50), get_p99_ms: pct(get, 99),
    trajectory_p50_ms: pct(traj, 50), rollout_page_p50_ms: pct(roPage, 50), filtered_p50_ms: pct(filt, 50), page_p50_ms: pct(page, 50),
    uses_index: plan.includes("ScalarIndexQuery"),
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "bench_index.mjs DIR NAME --probes FILE [--calls N] [--calls-noindex N] [--columns C,..]",
    flags: { probes: "string", calls: "string", "calls-noindex": "string", columns: "string" },
  });
  const [dir, name] = args._;
  const probes = JSON.parse(fs.readFileSync(args.probes, "utf8"));
  const calls = Number(args.calls ?? 50);
  const callsNo = Number(args["calls-noindex"] ?? 5);
  const columns = (args.columns ?? "id,rollout_id,problem_id").split(",");
  const db = await lancedb.connect(dir);
  let table = await db.openTable(name);
  const rows = await table.countRows();
  log(`rows ${rows}: measuring without an index`);
  const without = await measure(table, probes, callsNo);
  const t0 = process.hrtime.bigint();
  for (const c of columns) await table.createIndex(c, { config: lancedb.Index.btree(), replace: true });
  const build = Number(process.hrtime.bigint() - t0) / 1e9;
  log(`built BTree indexes on ${columns} in ${build.toFixed(1)} s`);
  table = await db.openTable(name);
  await measure(table, probes, 3); // warm: index lookups load their pages once
  const withIx = await measure(table, probes, calls);
  emit({ rows, without, index_build_secs: build, with: withIx });
}

run(main);
