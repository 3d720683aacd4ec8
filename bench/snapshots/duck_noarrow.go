//go:build !duckdb_arrow

package main

import (
	"context"
	"errors"

	"github.com/lance-context/lance-context/rollout"
)

var errNoDuckArrow = errors.New("built without -tags duckdb_arrow (DuckDB's Arrow scan)")

func duckCopy(context.Context, *rollout.Store, string) (int64, error) { return 0, errNoDuckArrow }
