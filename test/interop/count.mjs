// count.mjs URI NAME: opens URI/NAME.lance with LanceDB 0.31 and prints
// {"count": N, "version": V}. URI is a directory or s3://bucket/prefix; for
// S3 the endpoint and credentials come from the AWS_* environment (as the
// Go side reads them), path-style, plain HTTP allowed for a local server.
import * as lancedb from "@lancedb/lancedb";
import { emit, run } from "./lib.mjs";

run(async () => {
  const [uri, name] = process.argv.slice(2);
  if (!uri || !name) throw new Error("usage: count.mjs URI NAME");
  const opts = {};
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
  emit({ count: await t.countRows(), version: await t.version() });
});
