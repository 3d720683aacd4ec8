// bench_s3.mjs URI NAME --id X --rollout R [--samples N] [--admin URL] [--consistency default|strong]
//
// The LanceDB 0.31 side of `bench/roundtrips`: on table URI/NAME (a rollout
// store's base table on S3, reached through test/latencyproxy), one open
// table handle (warm: each operation runs once before it is timed) times
//   count   countRows()
//   get     id = X, limit 1, the list columns (LanceDB plans it on the
//           table's BTree index on id; uses_index says whether it did)
//   page    the first 25 rows, the list columns
//   traj    rollout_id = R, the list columns
// With --admin (the proxy's admin URL) each timed call runs between a
// POST /__reset and a GET /__stats, after the proxy has been idle for
// 300 ms, so every sample also has its request count and sequential depth.
// --consistency strong opens with readConsistencyInterval 0 (a version
// check on every read, as lance-context's reads do); default never checks.
// S3 endpoint and credentials come from the AWS_* environment (see count.mjs).
// stdout: {"rows", "consistency", "uses_index", "ops": {name: {"p50_ms",
//          "requests", "sequential", "samples"}}}
import * as lancedb from "@lancedb/lancedb";
import { emit, log, parseArgs, run } from "./lib.mjs";

const q = (s) => `'${s.replaceAll("'", "''")}'`;
const listCols = ["id", "rollout_id", "problem_id", "sequence_order", "role", "content"];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

run(async () => {
  const args = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "bench_s3.mjs URI NAME --id X --rollout R [--samples N] [--admin URL] [--consistency default|strong]",
    flags: { id: "string", rollout: "string", samples: "string", admin: "string", consistency: "string" },
  });
  const [uri, name] = args._;
  const samples = Number(args.samples ?? 9);
  const consistency = args.consistency ?? "default";
  const opts = {};
  if (consistency === "strong") opts.readConsistencyInterval = 0;
  if (uri.startsWith("s3://")) {
    const e = process.env;
    opts.storageOptions = {
      aws_access_key_id: e.AWS_ACCESS_KEY_ID ?? "",
      aws_secret_access_key: e.AWS_SECRET_ACCESS_KEY ?? "",
      region: e.AWS_REGION ?? "us-east-1",
      allow_http: "true",
      virtual_hosted_style_request: "false",
    };
    if (e.AWS_ENDPOINT_URL) opts.storageOptions.endpoint = e.AWS_ENDPOINT_URL;
  }
  const db = await lancedb.connect(uri, opts);
  const t = await db.openTable(name);
  const rows = await t.countRows();
  const plan = await t.query().where(`id = ${q(args.id)}`).limit(1).explainPlan(true);
  const ops = {
    count: async () => {
      if ((await t.countRows()) !== rows) throw new Error("count changed");
    },
    get: async () => {
      const r = await t.query().where(`id = ${q(args.id)}`).select(listCols).limit(1).toArray();
      if (r.length !== 1) throw new Error(`id ${args.id}: ${r.length} rows`);
    },
    page: async () => {
      const r = await t.query().select(listCols).limit(25).toArray();
      if (r.length !== 25) throw new Error(`page of ${r.length} rows`);
    },
    traj: async () => {
      const r = await t.query().where(`rollout_id = ${q(args.rollout)}`).select(listCols).toArray();
      if (r.length === 0) throw new Error(`trajectory ${args.rollout}: no rows`);
    },
  };
  const admin = args.admin;
  async function idle() {
    // Wait until the proxy saw no request for 300 ms.
    for (;;) {
      const a = await (await fetch(`${admin}/__stats`)).json();
      await sleep(300);
      const b = await (await fetch(`${admin}/__stats`)).json();
      if (a.requests === b.requests) return;
    }
  }
  const out = {};
  for (const [op, fn] of Object.entries(ops)) {
    await fn(); // warm up
    const ss = [];
    for (let i = 0; i < samples; i++) {
      if (admin) {
        await idle();
        await fetch(`${admin}/__reset`, { method: "POST" });
      }
      const t0 = process.hrtime.bigint();
      await fn();
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      let st = {};
      if (admin) st = await (await fetch(`${admin}/__stats`)).json();
      ss.push({ ms, requests: st.requests ?? null, sequential: st.sequential ?? null });
    }
    ss.sort((a, b) => a.ms - b.ms);
    const m = ss[Math.floor((ss.length - 1) / 2)];
    out[op] = { p50_ms: m.ms, requests: m.requests, sequential: m.sequential, samples };
    log(op, JSON.stringify(out[op]));
  }
  emit({ rows, consistency, uses_index: plan.includes("ScalarIndexQuery"), ops: out });
});
