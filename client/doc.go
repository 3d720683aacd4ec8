// Package client is the Go client of the lance-context worker HTTP API
// (routes under /api/v1/rollouts).
//
//	c := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("LC_API_TOKEN")))
//	if _, err := c.CreateStore(ctx, "runs"); err != nil && !client.IsCode(err, "already_exists") {
//		return err
//	}
//	res, err := c.Append(ctx, "runs", []rollout.Record{{RolloutID: "r1", Content: ptr("hi")}}, client.AppendOptions{Flush: true})
//	page, err := c.List(ctx, "runs", client.ListOptions{Source: rollout.SourceAll, Filters: map[string]string{"rollout_id": "r1"}})
//	for rec, err := range c.Iterate(ctx, "runs", client.ListOptions{Source: rollout.SourceAll}) { ... }
//
// # Visibility
//
// An acknowledged append is durable but readable only after a flush (the
// worker's sweeper, Flush, or AppendOptions.Flush). Flushed rows are in the
// "wal" source until a merge folds them into the base table ("fragments",
// the default source of List); "all" reads both.
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
// Compact, and appends. Appends are idempotent because the client gives every
// record without an id a UUIDv7 before the first attempt, so a retry writes
// the same ids again and the newest write of an id wins. 4xx responses are
// never retried. CreateStore and DeleteStore are not retried (a retry of a
// create that did succeed would answer 409). Backoff waits end early when
// the context ends.
//
// # Paging
//
// List pages by offset. Iterate and ListAll follow has_more. The order of a
// source is stable for a fixed set of writes; a flush or merge running while
// you page can shift rows between pages (for source "all", a merge moves rows
// from the WAL part, which comes first, to the base part), so page a quiet
// store, or a rollout's records through Trajectory, when exactness matters.
package client
