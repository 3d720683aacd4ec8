// snapshot.mjs DIR NAME --tag TAG --version V [--repeat-ms N]: opens
// DIR/NAME.lance with LanceDB 0.31 and reads the snapshot whole, checked
// out by tag and by version number. Prints {"by_tag": {version, count,
// rows_sha256}, "by_version": {...}, "tags": {name: version},
// "repeats": {reads, digests: [distinct rows_sha256], errors: [...]}}:
// rows_sha256 is the sha256 of the sorted "id|rollout_id" lines joined by
// newlines. With --repeat-ms it then reads version V again and again for
// that long (a long read, while the Go side merges, compacts and cleans).
import * as lancedb from "@lancedb/lancedb";
import { createHash } from "node:crypto";
import { emit, run, parseArgs } from "./lib.mjs";

async function readAll(t) {
  const rows = await t.query().select(["id", "rollout_id"]).toArray();
  const lines = rows.map((r) => `${r.id}|${r.rollout_id}`).sort();
  return { count: lines.length, rows_sha256: createHash("sha256").update(lines.join("\n")).digest("hex") };
}

run(async () => {
  const flags = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "snapshot.mjs DIR NAME --tag TAG --version V [--repeat-ms N]",
    flags: { tag: "string", version: "int", "repeat-ms": "int" },
  });
  const [dir, name] = flags._;
  const db = await lancedb.connect(dir);
  const t = await db.openTable(name);
  const out = { tags: {} };
  for (const [tag, c] of Object.entries(await t.tags().then((x) => x.list()))) out.tags[tag] = c.version;
  if (flags.tag) {
    await t.checkout(flags.tag);
    out.by_tag = { version: await t.version(), ...(await readAll(t)) };
  }
  if (flags.version) {
    await t.checkout(Number(flags.version));
    out.by_version = { version: await t.version(), ...(await readAll(t)) };
  }
  const repeats = { reads: 0, digests: [], errors: [] };
  const until = Date.now() + Number(flags["repeat-ms"] ?? 0);
  while (flags.version && Date.now() < until) {
    try {
      // A fresh handle each time: every read lists and opens the version anew.
      const t2 = await db.openTable(name);
      await t2.checkout(Number(flags.version));
      const r = await readAll(t2);
      if (!repeats.digests.includes(r.rows_sha256)) repeats.digests.push(r.rows_sha256);
    } catch (e) {
      repeats.errors.push(String(e.message ?? e));
    }
    repeats.reads++;
  }
  out.repeats = repeats;
  emit(out);
});
