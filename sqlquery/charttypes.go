package sqlquery

import "github.com/lance-context/lance-context/api"

// DefaultChartsMaxRowsScanned bounds the rows the charts of one store read.
const DefaultChartsMaxRowsScanned = 10_000_000

// Charts are the overview charts of a store (the wire type) and how their
// computation read the base table.
type Charts struct {
	api.Charts
	Base BaseSource
}

// BaseSource says how a computation of the charts read the base table.
type BaseSource string

const (
	BaseScanned BaseSource = "scanned" // the store was scanned (no cache, or the cache could not serve)
	BaseCached  BaseSource = "cached"  // from the cached base of this base table version
	BaseBuilt   BaseSource = "built"   // scanned into a new cached base
	BaseUpdated BaseSource = "updated" // the cached base of an earlier version, updated with the fragments changed since
)
