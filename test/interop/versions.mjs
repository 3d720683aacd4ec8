// versions.mjs DIR NAME [--create-tag TAG --version V]: opens DIR/NAME.lance
// with LanceDB 0.31 and prints {"latest", "versions": [{version, count,
// ids_sha256} | {version, error}], "tags": {name: {version, count}}}: every
// version LanceDB lists, checked out and read whole, and every tag checked
// out by name. With --create-tag it first tags V itself (Lance's own writer
// of _refs/tags), so the Go side reads LanceDB's tags too.
import * as lancedb from "@lancedb/lancedb";
import { createHash } from "node:crypto";
import { emit, run, parseArgs } from "./lib.mjs";

async function readAll(t) {
  const rows = await t.query().select(["id"]).toArray();
  const ids = rows.map((r) => r.id).sort();
  return { count: ids.length, ids_sha256: createHash("sha256").update(ids.join("\n")).digest("hex") };
}

run(async () => {
  const flags = parseArgs(process.argv.slice(2), {
    positional: 2,
    usage: "versions.mjs DIR NAME [--create-tag TAG --version V]",
    flags: { "create-tag": "string", version: "int" },
  });
  const [dir, name] = flags._;
  const db = await lancedb.connect(dir);
  const t = await db.openTable(name);
  const tags = await t.tags();
  if (flags["create-tag"]) await tags.create(flags["create-tag"], Number(flags.version));
  const latest = await t.version();
  const versions = [];
  for (const v of await t.listVersions()) {
    try {
      await t.checkout(v.version);
      versions.push({ version: v.version, ...(await readAll(t)) });
    } catch (e) {
      versions.push({ version: v.version, error: String(e.message ?? e) });
    }
  }
  const out = {};
  for (const [tag, c] of Object.entries(await tags.list())) {
    await t.checkout(tag);
    out[tag] = { version: c.version, manifest_size: c.manifestSize, count: (await readAll(t)).count };
  }
  await t.checkoutLatest();
  emit({ latest, versions, tags: out });
});
