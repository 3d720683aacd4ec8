//go:build !cgo

package sqlquery

import (
	"context"
	"io"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/rollout"
)

// Without cgo there is no DuckDB: every query fails with ErrUnavailable.

// chartBase is a cached chart base; without cgo there is none.
type chartBase struct{}

// Close releases nothing: there is no cached chart base.
func (e *Engine) Close() {}

// Query fails with ErrUnavailable.
func (e *Engine) Query(context.Context, Request) (*Result, error) { return nil, ErrUnavailable }

// Charts fails with ErrUnavailable.
func (e *Engine) Charts(context.Context, string, rollout.Source) (*Charts, error) {
	return nil, ErrUnavailable
}

// JSONRows returns the rows unchanged.
func (r *Result) JSONRows() [][]any { return r.Rows }

// Arrow fails with ErrUnavailable.
func (r *Result) Arrow() (arrow.RecordBatch, error) { return nil, ErrUnavailable }

// WriteArrow fails with ErrUnavailable.
func (r *Result) WriteArrow(io.Writer) error { return ErrUnavailable }
