package row

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"
)

// rows is a batch of appended rows as validate and the checks see them,
// whichever path they came by: Records (JSON, multipart) or the columns of
// an Arrow batch converted to Schema's types. c is a position in columns.
type rows interface {
	len() int
	// null reports row i without a value in column c: absent or null (a
	// Record's required text field: empty; validate treats an empty
	// required text as missing on both paths).
	null(c, i int) bool
	text(c, i int) string // a non-null text value
	int32At(c, i int) int32
	int64At(c, i int) int64
	// payload is row i's binary_payload, ok false when it has none.
	payload(i int) (p []byte, ok bool)
	// name is column c's name (the checks are part of columns, so they
	// reach the table through rows).
	name(c int) string
	// sum is the sha256 of row i's payload (computed once).
	sum(i int) *[sha256.Size]byte
	// badText returns the first row below limit with text that is not
	// UTF-8 (in it, the first text column in table order), and what is
	// wrong; limit when there is none.
	badText(limit int) (int, string)
}

// validate runs the rules of columns on rs and returns the first
// violation as a *ValidationError "record N: what", N counted from base:
// the lowest bad row, and in it, in this order, a required column without
// a value, text that is not UTF-8, the columns' checks (each in table
// order). Both append paths call it, so a rule gives the same message
// whichever path a row came by.
//
// Each rule scans only the rows below the lowest bad row found so far, so
// the whole costs one pass over the checked columns.
func validate(rs rows, base int) error {
	worst, msg := rs.len(), ""
	for _, r := range rules {
		switch r.kind {
		case ruleRequired:
			for i := range worst {
				if rs.null(r.col, i) || rs.text(r.col, i) == "" {
					worst, msg = i, columns[r.col].name+" is required"
					break
				}
			}
		case ruleUTF8:
			if i, m := rs.badText(worst); i < worst {
				worst, msg = i, m
			}
		case ruleCheck:
			check := columns[r.col].check
			for i := range worst {
				if m := check(rs, r.col, i); m != "" {
					worst, msg = i, m
					break
				}
			}
		}
	}
	if msg != "" {
		return Invalidf("record %d: %s", base+worst, msg)
	}
	return nil
}

// rule is one step of validate: a kind of rule on the column at col.
type rule struct {
	col  int
	kind ruleKind
}

type ruleKind uint8

const (
	ruleRequired ruleKind = iota // a required text column without a default has a value
	ruleUTF8                     // all text (textCols) is UTF-8
	ruleCheck                    // the column's check
)

// rules are the steps of validate, derived once from columns.
var rules = func() []rule {
	var out []rule
	for i := range columns {
		if c := &columns[i]; c.required && c.def.kind == noDefault {
			if c.typ.ID() != arrow.STRING {
				panic("row: a required column without a default must be utf8: " + c.name)
			}
			out = append(out, rule{i, ruleRequired})
		}
	}
	out = append(out, rule{-1, ruleUTF8})
	for i := range columns {
		if columns[i].check != nil {
			out = append(out, rule{i, ruleCheck})
		}
	}
	return out
}()

// textCols are the positions of the text columns, in table order.
var textCols = func() []int {
	var out []int
	for i := range columns {
		if isText(&columns[i]) {
			out = append(out, i)
		}
	}
	return out
}()

// The checks of columns.

func checkNonNegative(rs rows, c, i int) string {
	if !rs.null(c, i) && rs.int32At(c, i) < 0 {
		return rs.name(c) + " must be >= 0"
	}
	return ""
}

func checkJSON(rs rows, c, i int) string {
	if rs.null(c, i) {
		return ""
	}
	s := rs.text(c, i)
	if !json.Valid(unsafe.Slice(unsafe.StringData(s), len(s))) { // json.Valid only reads
		return rs.name(c) + " must be JSON"
	}
	return ""
}

// checkPayloadSize: a given payload_size must be the payload's length.
func checkPayloadSize(rs rows, c, i int) string {
	p, ok := rs.payload(i)
	if !ok || rs.null(c, i) {
		return ""
	}
	if n, v := int64(len(p)), rs.int64At(c, i); v != n {
		return fmt.Sprintf("%s %d does not match the %d payload bytes", rs.name(c), v, n)
	}
	return ""
}

// checkPayloadSum: a given payload_checksum must be the payload's sha256,
// in hex, bare or after "sha256:".
func checkPayloadSum(rs rows, c, i int) string {
	if _, ok := rs.payload(i); !ok || rs.null(c, i) {
		return ""
	}
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], rs.sum(i)[:])
	if s := rs.text(c, i); s != string(hx[:]) && s != "sha256:"+string(hx[:]) {
		return fmt.Sprintf("%s does not match the payload (sha256 %s)", rs.name(c), hx[:])
	}
	return ""
}

func notUTF8(c int) string { return fmt.Sprintf("column %q is not valid UTF-8", columns[c].name) }

// sumCache caches the sha256 of payloads, computed on first use: the
// checksum check and the checksum default share it.
type sumCache struct {
	sums [][sha256.Size]byte
	done []bool
}

func (p *sumCache) get(n, i int, payload func(int) []byte) *[sha256.Size]byte {
	if p.sums == nil {
		p.sums, p.done = make([][sha256.Size]byte, n), make([]bool, n)
	}
	if !p.done[i] {
		p.sums[i], p.done[i] = sha256.Sum256(payload(i)), true
	}
	return &p.sums[i]
}

// Per column, the field's views (nil where the field has none).
var (
	textFields  = fieldViews[textField]()
	int32Fields = fieldViews[int32Field]()
	int64Fields = fieldViews[int64Field]()
)

func fieldViews[V any]() []V {
	out := make([]V, len(columns))
	for i, c := range columns {
		if v, ok := c.field.(V); ok {
			out[i] = v
		}
	}
	return out
}

// recordRowsPool saves an allocation per append of a few records.
var recordRowsPool = sync.Pool{New: func() any { return new(recordRows) }}

// recordRows are the rows of a JSON (or multipart) append.
type recordRows struct {
	recs []Record
	sums sumCache
}

func (rs *recordRows) len() int               { return len(rs.recs) }
func (rs *recordRows) null(c, i int) bool     { return columns[c].field.null(&rs.recs[i]) }
func (rs *recordRows) text(c, i int) string   { return textFields[c].text(&rs.recs[i]) }
func (rs *recordRows) int32At(c, i int) int32 { return int32Fields[c].int32Of(&rs.recs[i]) }
func (rs *recordRows) int64At(c, i int) int64 { return int64Fields[c].int64Of(&rs.recs[i]) }
func (rs *recordRows) name(c int) string      { return columns[c].name }
func (rs *recordRows) payload(i int) ([]byte, bool) {
	p := rs.recs[i].BinaryPayload
	return p, p != nil
}
func (rs *recordRows) sum(i int) *[sha256.Size]byte {
	return rs.sums.get(len(rs.recs), i, func(i int) []byte { return rs.recs[i].BinaryPayload })
}

func (rs *recordRows) badText(limit int) (int, string) {
	for i := range limit {
		r := &rs.recs[i]
		for _, c := range textCols {
			switch f := columns[c].field.(type) {
			case optText:
				if v := *f(r); v != nil && !utf8.ValidString(*v) {
					return i, notUTF8(c)
				}
			case reqText:
				if !utf8.ValidString(*f(r)) {
					return i, notUTF8(c)
				}
			case relationsField:
				for k := range 2 { // target_ids first, as the Arrow path scans
					for _, rel := range r.Relationships {
						if s := [2]*string{rel.TargetID, rel.Relation}[k]; s != nil && !utf8.ValidString(*s) {
							return i, relationNotUTF8(c, k)
						}
					}
				}
			default:
				if textFields[c].badUTF8(r) {
					return i, notUTF8(c)
				}
			}
		}
	}
	return limit, ""
}

func relationNotUTF8(c, k int) string {
	return fmt.Sprintf("column %q: %s is not valid UTF-8", columns[c].name, relationsTy.Field(k).Name)
}

// Prepare validates recs (validate) and fills their defaults, in
// place: what an append does before the records go to Arrow. base is the
// index of recs[0] in its request, for messages.
func Prepare(recs []Record, base int, now time.Time) error {
	rs := recordRowsPool.Get().(*recordRows)
	defer func() {
		*rs = recordRows{}
		recordRowsPool.Put(rs)
	}()
	rs.recs = recs
	if err := validate(rs, base); err != nil {
		return err
	}
	for i := range recs {
		r := &recs[i]
		for _, ci := range defaulted {
			c := &columns[ci]
			switch c.def.kind {
			case defaultNewID, defaultText, defaultCopy:
				if f, ok := c.field.(reqText); ok { // the common kind, one call
					if p := f(r); *p == "" {
						*p = textDefault(c, r)
					}
				} else if c.field.null(r) {
					textFields[ci].setText(r, textDefault(c, r))
				}
			case defaultNow:
				if c.field.null(r) {
					c.field.(timeField).setTime(r, now)
				}
			case defaultZero:
				// sequence_order is a plain int32 in Record: 0 already.
			case defaultSize:
				if r.BinaryPayload != nil {
					int64Fields[ci].setInt64(r, int64(len(r.BinaryPayload)))
				}
			case defaultSum:
				if r.BinaryPayload != nil {
					textFields[ci].setText(r, hex.EncodeToString(rs.sum(i)[:]))
				}
			}
		}
	}
	return nil
}

// textDefault is the default of text column c for record r.
func textDefault(c *column, r *Record) string {
	switch c.def.kind {
	case defaultNewID:
		return uuid.Must(uuid.NewV7()).String()
	case defaultCopy:
		return textFields[c.def.fromCol].text(r)
	}
	return c.def.text
}

// defaulted are the positions of the columns with a default, in order (a
// copied default comes after its source: the source has no default).
var defaulted = func() []int {
	var out []int
	for i, c := range columns {
		if c.def.kind != noDefault {
			out = append(out, i)
		}
	}
	return out
}()

// applyDefaults validates one record and fills its defaults; index is its
// position in its request, for messages.
func applyDefaults(r *Record, index int, now time.Time) error {
	return Prepare(unsafe.Slice(r, 1), index, now)
}

// arrowRows are the rows of an Arrow append: cols are the batch's columns
// converted to Schema's types, by position in columns (nil: absent).
type arrowRows struct {
	n    int
	cols []arrow.Array
	sums sumCache
}

func (rs *arrowRows) len() int { return rs.n }
func (rs *arrowRows) null(c, i int) bool {
	a := rs.cols[c]
	return a == nil || a.IsNull(i)
}
func (rs *arrowRows) text(c, i int) string {
	switch a := rs.cols[c].(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	}
	return ""
}
func (rs *arrowRows) int32At(c, i int) int32 { return rs.cols[c].(*array.Int32).Value(i) }
func (rs *arrowRows) int64At(c, i int) int64 { return rs.cols[c].(*array.Int64).Value(i) }
func (rs *arrowRows) name(c int) string      { return columns[c].name }
func (rs *arrowRows) payload(i int) ([]byte, bool) {
	p, _ := rs.cols[payloadCol].(*array.LargeBinary)
	if p == nil || p.IsNull(i) {
		return nil, false
	}
	return p.Value(i), true
}
func (rs *arrowRows) sum(i int) *[sha256.Size]byte {
	return rs.sums.get(rs.n, i, rs.cols[payloadCol].(*array.LargeBinary).Value)
}

func (rs *arrowRows) badText(limit int) (int, string) {
	row, msg := limit, ""
	for _, c := range textCols {
		a := rs.cols[c]
		if a == nil {
			continue
		}
		if columns[c].name != ColRelationships {
			if i := invalidUTF8(a); i >= 0 && i < row {
				row, msg = i, notUTF8(c)
			}
			continue
		}
		l := a.(*array.List)
		st := l.ListValues().(*array.Struct)
		for k := range 2 {
			if j := invalidUTF8(st.Field(k)); j >= 0 {
				// The row whose list holds the bad item.
				r := sort.Search(l.Len(), func(i int) bool { _, end := l.ValueOffsets(i); return int(end) > j })
				if r < row {
					row, msg = r, relationNotUTF8(c, k)
				}
			}
		}
	}
	return row, msg
}
