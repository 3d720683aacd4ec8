// Package api holds the wire types of the lance-context HTTP API: the
// request and response bodies of the worker's rollout routes and the
// master's data browser, the record as JSON, the error envelope and its
// codes. It imports nothing of the engine, so the Go client, the servers
// and the OpenAPI document share one statement of the contract.
//
// The rollout routes are a superset of the reference system's wire
// contract (its client and DTOs): every field it sends is accepted and
// every field it reads is present, with the same names and types. What we
// add beyond it (sources, cursors, flushed, Arrow appends, statistics) is
// additive.
package api
