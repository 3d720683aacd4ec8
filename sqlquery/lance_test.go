//go:build cgo

package sqlquery

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/rollout"
)

// directSig is chartSig of a table opened by a test through lance/table
// (the engine itself opens base tables through rollout only).
func directSig(d *table.Dataset) (sig string, ok bool) {
	var sb strings.Builder
	for _, name := range chartCols {
		f := d.Schema().Field(name)
		if f == nil {
			return "", false
		}
		t := f.ArrowField().Type
		if dt, ok := t.(*arrow.DictionaryType); ok {
			t = dt.ValueType
		}
		i := rollout.Schema.FieldIndices(name)
		if len(i) != 1 || !arrow.TypeEqual(t, rollout.Schema.Field(i[0]).Type) {
			return "", false
		}
		fmt.Fprintf(&sb, "%s:%d:%s;", name, f.ID, t)
	}
	return sb.String(), true
}
