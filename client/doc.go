// Package client is the Go client of the lance-context worker HTTP API
// (routes under /api/v1/rollouts) and of the master's SQL queries (Query,
// OpenQueryArrow: /api/v1/experiments/{name}/query). Its types are those of package api; it
// imports nothing of the engine.
//
//	c := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("LC_API_TOKEN")))
//	if _, err := c.CreateStore(ctx, "runs"); err != nil && !client.IsCode(err, api.CodeAlreadyExists) {
//		return err
//	}
//	res, err := c.Append(ctx, "runs", []api.Record{{RolloutID: "r1", Content: ptr("hi")}}, client.AppendOptions{Flush: true})
//	page, err := c.List(ctx, "runs", client.ListOptions{Source: api.SourceAll, Filters: map[string]string{"rollout_id": "r1"}})
//	for rec, err := range c.Iterate(ctx, "runs", client.ListOptions{Source: api.SourceAll}) { ... }
//
// # Visibility
//
// An acknowledged append is durable but readable only after a flush (the
// worker's sweeper, Flush, or AppendOptions.Flush). Flushed rows are in the
// "wal" source until a merge folds them into the base table ("fragments");
// "all", a worker's default source, reads both.
//
// # Errors
//
// A response with a status >= 400 is returned as an *APIError (use
// errors.As, or IsCode / IsNotFound) holding the status, the stable code and
// the message of the worker's error envelope {"error":{"code","message"}}.
// Errors after retries wrap the last one, so errors.As still finds it.
//
// # Retries
//
// Idempotent calls are retried with exponential backoff and jitter on
// 502, 503 and 504 responses (a Retry-After header is honoured, capped at
// RetryPolicy.MaxBackoff) and on connection errors: every GET, Flush, Merge,
// Compact, Query, and appends. Appends are idempotent because the client gives every
// record without an id a UUIDv7 before the first attempt, so a retry writes
// the same ids again and the newest write of an id wins. 4xx responses are
// never retried. CreateStore and DeleteStore are not retried (a retry of a
// create that did succeed would answer 409). Backoff waits end early when
// the context ends.
//
// # Paging
//
// Listings are in id order. List pages by cursor (ListOptions.Cursor =
// the previous page's NextCursor) or by offset. Following cursors returns
// every record that existed when the listing began exactly once, whatever
// merges and compactions run meanwhile; offsets are for page numbers and
// can skip or repeat rows while a merge runs. Iterate and ListAll follow
// cursors.
package client
