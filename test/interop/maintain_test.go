package interop

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

var maintSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	{Name: "v", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
}, nil)

func maintRow(id string, n int) map[string]any {
	r := map[string]any{"id": id, "n": int64(n), "s": fmt.Sprintf("s%d", n%4),
		"ts": arrow.Timestamp(1700000000000000 + int64(n)*1000001)}
	if n%5 != 0 {
		r["lb"] = pattern(n%40, n)
	}
	if n%6 != 0 {
		r["v"] = []float32{float32(n), float32(n) + 0.5, -float32(n), 0.25}
	}
	if n%9 == 0 {
		r["s"] = nil
	}
	return r
}

// jsonLine encodes a native row as maintain.mjs input (binary as base64,
// timestamps as integer microseconds).
func jsonLine(t testing.TB, r map[string]any) []byte {
	t.Helper()
	o := map[string]any{}
	for k, v := range r {
		switch x := v.(type) {
		case []byte:
			o[k] = base64.StdEncoding.EncodeToString(x)
		case arrow.Timestamp:
			o[k] = int64(x)
		default:
			o[k] = v
		}
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// encodedRows encodes native rows through Arrow, keyed by id.
func encodedRows(s *arrow.Schema, native []map[string]any) map[string]row {
	rec := buildBatch(s, native)
	defer rec.Release()
	out := map[string]row{}
	for _, r := range recordRows(rec) {
		out[r["id"].(string)] = r
	}
	return out
}

// expectRows returns the expected rows for the given ids, sorted by id.
func expectRows(t testing.TB, all map[string]row, idList []string) []row {
	t.Helper()
	var out []row
	for _, id := range idList {
		r, ok := all[id]
		if !ok {
			t.Fatalf("internal: no expected row %q", id)
		}
		out = append(out, r)
	}
	sortByID(out)
	return out
}

func idSet(m map[string]bool) []string {
	var out []string
	for id, ok := range m {
		if ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func hasIndex(doc map[string]any, name string) bool {
	list, _ := doc["indices"].([]any)
	for _, x := range list {
		if m, ok := x.(map[string]any); ok && m["name"] == name {
			return true
		}
	}
	return false
}

// addrsOf finds the row addresses of the given ids in d.
func addrsOf(t testing.TB, d *table.Dataset, want ...string) []table.RowAddr {
	t.Helper()
	rows, addrs := scanRows(t, d, table.ScanOptions{Columns: []string{"id"}, WithRowAddr: true})
	byID := map[string]table.RowAddr{}
	for i, r := range rows {
		byID[r["id"].(string)] = addrs[i]
	}
	var out []table.RowAddr
	for _, id := range want {
		a, ok := byID[id]
		if !ok {
			t.Fatalf("id %q is not a live row of version %d", id, d.Version())
		}
		out = append(out, a)
	}
	return out
}

// agree asserts Go (manifest count and a full scan) and LanceDB (count and
// ids) both see exactly the ids in want, and Go's values equal all[id].
func agree(t testing.TB, what string, dir, name string, st objstore.Store, all map[string]row, want []string) *table.Dataset {
	t.Helper()
	d := openTable(t, st)
	if d.CountRows() != int64(len(want)) {
		t.Errorf("%s: Go CountRows %d, want %d", what, d.CountRows(), len(want))
	}
	got, _ := scanRows(t, d, table.ScanOptions{})
	sortByID(got)
	checkIDs(t, what+": Go ids", ids(got), want)
	if reflect.DeepEqual(ids(got), want) {
		compareRows(t, what+": Go values", got, expectRows(t, all, want))
	}
	count, lids := dumpIDs(t, dir, name)
	if count != int64(len(want)) {
		t.Errorf("%s: LanceDB count %d, want %d", what, count, len(want))
	}
	checkIDs(t, what+": LanceDB ids", lids, want)
	return d
}

// TestLanceDBMaintainsGoTable: LanceDB appends to, deletes from, indexes and
// compacts a Go table; Go then reads it, appends, deletes and compacts on top
// of LanceDB's index, which LanceDB keeps using.
func TestLanceDBMaintainsGoTable(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "maint")
	ls := createTable(t, st, maintSchema)

	var native []map[string]any
	live := map[string]bool{}
	for f := 0; f < 3; f++ {
		var rows []map[string]any
		for i := f * 100; i < f*100+100; i++ {
			rows = append(rows, maintRow(fmt.Sprintf("g-%03d", i), i))
		}
		native = append(native, rows...)
		rec := buildBatch(maintSchema, rows)
		appendFrags(t, st, writeFrag(t, st, ls, 0, rec))
		rec.Release()
	}
	for _, r := range native {
		live[r["id"].(string)] = true
	}

	// Ten rows for LanceDB to append, as JSON lines.
	var jsonl []byte
	for k := 0; k < 10; k++ {
		r := maintRow(fmt.Sprintf("n-%d", k), 1000+k)
		native = append(native, r)
		live[r["id"].(string)] = true
		jsonl = append(jsonl, jsonLine(t, r)...)
	}
	appendFile := filepath.Join(dir, "append.jsonl")
	if err := os.WriteFile(appendFile, jsonl, 0o644); err != nil {
		t.Fatal(err)
	}
	all := encodedRows(maintSchema, native)

	// Delete g-250..g-299 and g-007 (Go rows; half of fragment 3).
	for i := 250; i < 300; i++ {
		live[fmt.Sprintf("g-%03d", i)] = false
	}
	live["g-007"] = false
	m := runNode(t, "maintain.mjs", dir, "maint", "--append", appendFile,
		"--delete", "(n >= 250 AND n < 1000) OR id = 'g-007'", "--index", "--compact")
	want := idSet(live)
	if c := num(t, m, "count"); c != int64(len(want)) {
		t.Errorf("maintain count %d, want %d", c, len(want))
	}
	if !hasIndex(m, "id_idx") {
		t.Errorf("maintain: no id_idx index: %s", brief(m["indices"]))
	}
	if dv := normalize(m["data_file_versions"]); !reflect.DeepEqual(dv, []any{[]any{int64(0), int64(3)}}) {
		t.Errorf("maintain: data file versions %v, want only [0 3] (2.0)", dv)
	}
	steps, _ := m["steps"].([]any)
	if len(steps) != 4 {
		t.Errorf("maintain: %d steps, want 4: %s", len(steps), brief(steps))
	} else if del := normalize(steps[1].(map[string]any)["deleted"]); del != int64(51) {
		t.Errorf("maintain: LanceDB deleted %v rows, want 51", del)
	}

	d := agree(t, "after LanceDB maintenance", dir, "maint", st, all, want)
	if d.Version() != uint64(num(t, m, "version")) {
		t.Errorf("Go opens version %d, LanceDB's latest is %d", d.Version(), num(t, m, "version"))
	}
	if !d.HasIndexSection() {
		t.Fatalf("Go: version %d has no index section after LanceDB built id_idx", d.Version())
	}

	checkIndex := func(what, id string, wantFound bool) map[string]any {
		t.Helper()
		doc := runNode(t, "check_index.mjs", dir, "maint", "--id", id)
		wantCount, wantIDs := int64(0), []any{}
		if wantFound {
			wantCount, wantIDs = 1, []any{id}
		}
		if c := num(t, doc, "count"); c != wantCount {
			t.Errorf("%s: LanceDB count where id = %q is %d, want %d", what, id, c, wantCount)
		}
		if f := normalize(doc["found_ids"]); !reflect.DeepEqual(f, wantIDs) {
			t.Errorf("%s: LanceDB found %v for id %q, want %v", what, f, id, wantIDs)
		}
		if !hasIndex(doc, "id_idx") {
			t.Errorf("%s: LanceDB lists no id_idx index: %s", what, brief(doc["indices"]))
		}
		return doc
	}
	indexStats := func(doc map[string]any) map[string]any {
		stats, _ := normalize(doc["index_stats"]).(map[string]any)
		s, _ := stats["id_idx"].(map[string]any)
		return s
	}

	// Go appends on top of LanceDB's index.
	var more []map[string]any
	for k := 0; k < 20; k++ {
		r := maintRow(fmt.Sprintf("g2-%02d", k), 2000+k)
		more = append(more, r)
		live[r["id"].(string)] = true
	}
	native = append(native, more...)
	all = encodedRows(maintSchema, native)
	rec := buildBatch(maintSchema, more)
	d = appendFrags(t, st, writeFrag(t, st, ls, 0, rec))
	rec.Release()
	if !d.HasIndexSection() {
		t.Errorf("Go append dropped the index section (version %d)", d.Version())
	}
	doc := checkIndex("after Go append", "g2-05", true)
	if !normalize(doc["uses_index"]).(bool) {
		t.Errorf("after Go append: LanceDB no longer uses the index: %s", brief(doc))
	}
	if s := indexStats(doc); s["numIndexedRows"] != int64(len(want)) || s["numUnindexedRows"] != int64(20) {
		t.Errorf("after Go append: index stats %s, want %d indexed and 20 unindexed rows", brief(s), len(want))
	}
	checkIndex("after Go append (indexed row)", "g-100", true)
	agree(t, "after Go append", dir, "maint", st, all, idSet(live))

	// Go deletes an indexed row and a Go-appended row.
	d = openTable(t, st)
	addrs := addrsOf(t, d, "g-100", "g2-03")
	d, err := table.DeleteRows(ctx, st, addrs, "id IN ('g-100', 'g2-03')")
	if err != nil {
		t.Fatal(err)
	}
	live["g-100"], live["g2-03"] = false, false
	if !d.HasIndexSection() {
		t.Errorf("Go delete dropped the index section (version %d)", d.Version())
	}
	checkIndex("after Go delete", "g2-05", true)
	checkIndex("after Go delete (deleted indexed row)", "g-100", false)
	checkIndex("after Go delete (deleted unindexed row)", "g2-03", false)
	agree(t, "after Go delete", dir, "maint", st, all, idSet(live))

	// Go compacts (rewriting the indexed fragment).
	res, err := table.Compact(ctx, st, table.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed < 2 || res.Added != 1 {
		t.Errorf("Go compact removed %d and added %d fragments, want >= 2 and 1", res.Removed, res.Added)
	}
	if !res.Dataset.HasIndexSection() {
		t.Errorf("Go compact dropped the index section (version %d)", res.Dataset.Version())
	}
	doc = checkIndex("after Go compact", "g2-05", true)
	t.Logf("after Go compact: index stats %s, uses_index %v", brief(doc["index_stats"]), doc["uses_index"])
	checkIndex("after Go compact (old indexed row)", "g-150", true)
	checkIndex("after Go compact (deleted row)", "g-100", false)
	agree(t, "after Go compact", dir, "maint", st, all, idSet(live))

	// LanceDB optimizes again on top of Go's commits and re-covers every row.
	m = runNode(t, "maintain.mjs", dir, "maint", "--compact")
	if c := num(t, m, "count"); c != int64(len(idSet(live))) {
		t.Errorf("LanceDB optimize after Go: count %d, want %d", c, len(idSet(live)))
	}
	doc = checkIndex("after LanceDB re-optimize", "g2-19", true)
	if s := indexStats(doc); s["numUnindexedRows"] != int64(0) || s["numIndexedRows"] != int64(len(idSet(live))) {
		t.Errorf("after LanceDB re-optimize: index stats %s, want all %d rows indexed", brief(s), len(idSet(live)))
	}
	d = agree(t, "after LanceDB re-optimize", dir, "maint", st, all, idSet(live))
	if !d.HasIndexSection() {
		t.Errorf("no index section after LanceDB re-optimize")
	}
}

// TestDeletionsBothSides: Go and LanceDB delete rows of the same fragments,
// on top of each other's deletion files, and agree on what is left.
func TestDeletionsBothSides(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "del")
	ls := createTable(t, st, maintSchema)
	var native []map[string]any
	live := map[string]bool{}
	for f := 0; f < 3; f++ {
		var rows []map[string]any
		for i := f * 100; i < f*100+100; i++ {
			id := fmt.Sprintf("d-%03d", i)
			rows = append(rows, maintRow(id, i))
			live[id] = true
		}
		native = append(native, rows...)
		rec := buildBatch(maintSchema, rows)
		appendFrags(t, st, writeFrag(t, st, ls, 0, rec))
		rec.Release()
	}
	all := encodedRows(maintSchema, native)

	goDelete := func(pred func(n int) bool) {
		t.Helper()
		var del []string
		for i := 0; i < 300; i++ {
			id := fmt.Sprintf("d-%03d", i)
			if pred(i) && live[id] {
				del = append(del, id)
				live[id] = false
			}
		}
		if len(del) == 0 {
			t.Fatal("internal: Go delete selects nothing")
		}
		if _, err := table.DeleteRows(ctx, st, addrsOf(t, openTable(t, st), del...), "go"); err != nil {
			t.Fatal(err)
		}
	}
	ldbDelete := func(sql string, pred func(n int) bool) {
		t.Helper()
		n := 0
		for i := 0; i < 300; i++ {
			id := fmt.Sprintf("d-%03d", i)
			if pred(i) && live[id] {
				live[id] = false
				n++
			}
		}
		m := runNode(t, "maintain.mjs", dir, "del", "--delete", sql)
		steps, _ := m["steps"].([]any)
		if len(steps) != 1 || normalize(steps[0].(map[string]any)["deleted"]) != int64(n) {
			t.Errorf("LanceDB delete %q: steps %s, want %d rows deleted", sql, brief(steps), n)
		}
	}

	delTypes := func(d *table.Dataset) []string {
		var out []string
		for _, f := range d.Fragments() {
			out = append(out, fmt.Sprintf("%d:%v", f.GetId(), f.GetDeletionFile().GetFileType()))
		}
		return out
	}
	// 1. Go deletes from fragments 0 and 2.
	goDelete(func(n int) bool { return (n < 100 && n%10 == 1) || (n >= 200 && n < 210) })
	d := agree(t, "after Go delete", dir, "del", st, all, idSet(live))
	if d.Fragments()[1].GetDeletionFile() != nil {
		t.Fatalf("fragment 1 has a deletion file already")
	}
	// 2. LanceDB deletes from every fragment: on top of Go's deletion files
	// (overlapping on n = 1), and first in fragment 1.
	ldbDelete("n % 10 = 3 OR n = 1 OR n = 42", func(n int) bool { return n%10 == 3 || n == 1 || n == 42 })
	d = agree(t, "after LanceDB delete", dir, "del", st, all, idSet(live))
	// LanceDB writes a small deletion vector as an Arrow file: Go must read both kinds.
	t.Logf("deletion file types after LanceDB delete: %v", delTypes(d))
	if df := d.Fragments()[1].GetDeletionFile(); df == nil || df.GetFileType() != pb.DeletionFile_ARROW_ARRAY {
		t.Errorf("fragment 1: LanceDB deletion file %v, want an Arrow file (this test means to cover Go reading one)", df)
	}
	// 3. Go deletes on top of LanceDB's deletion files.
	goDelete(func(n int) bool { return n%10 == 5 || n == 43 })
	d = agree(t, "after second Go delete", dir, "del", st, all, idSet(live))
	t.Logf("deletion file types after second Go delete: %v", delTypes(d))
	if len(d.Fragments()) != 3 {
		t.Errorf("%d fragments, want 3", len(d.Fragments()))
	}
	// 4. Go deletes the rest of fragment 2: the fragment goes away.
	goDelete(func(n int) bool { return n >= 200 })
	d = agree(t, "after Go deleted a whole fragment", dir, "del", st, all, idSet(live))
	if len(d.Fragments()) != 2 {
		t.Errorf("%d fragments after deleting every row of one, want 2", len(d.Fragments()))
	}
	// 5. LanceDB deletes again, including a whole fragment.
	ldbDelete("n < 100 OR n = 150", func(n int) bool { return n < 100 || n == 150 })
	d = agree(t, "after LanceDB deleted a whole fragment", dir, "del", st, all, idSet(live))
	if len(d.Fragments()) != 1 {
		t.Errorf("%d fragments, want 1", len(d.Fragments()))
	}
	// LanceDB's filtered counts on the surviving rows.
	doc := runNode(t, "dump.mjs", dir, "del", "--where", "n % 10 = 3 OR n % 10 = 5", "--no-rows")
	if c := num(t, doc, "count"); c != 0 {
		t.Errorf("LanceDB still sees %d deleted rows", c)
	}
	wantS1 := 0
	for _, id := range idSet(live) {
		if all[id]["s"] == "s1" {
			wantS1++
		}
	}
	doc = runNode(t, "dump.mjs", dir, "del", "--where", "s = 's1'", "--no-rows")
	if c := num(t, doc, "count"); c != int64(wantS1) {
		t.Errorf("LanceDB count where s = 's1': %d, want %d", c, wantS1)
	}
	got, _ := scanRows(t, d, table.ScanOptions{Columns: []string{"id"}, Where: []table.Eq{{Column: "s", Value: "s1"}}})
	if len(got) != wantS1 {
		t.Errorf("Go count where s = s1: %d, want %d", len(got), wantS1)
	}
}

// TestGoPartialCompactKeepsIndex: Go compacts only some of the fragments a
// LanceDB index covers. LanceDB keeps using the index for the untouched
// fragment, finds the rewritten rows by scanning, and never returns a stale
// index entry of a rewritten (or deleted) row.
func TestGoPartialCompactKeepsIndex(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "pc")
	ls := createTable(t, st, maintSchema)
	var native []map[string]any
	live := map[string]bool{}
	for _, part := range []struct {
		format   string
		from, to int
	}{{"a-%03d", 0, 200}, {"b-%02d", 500, 550}} {
		var rows []map[string]any
		for i := part.from; i < part.to; i++ {
			id := fmt.Sprintf(part.format, i-part.from)
			rows = append(rows, maintRow(id, i))
			live[id] = true
		}
		native = append(native, rows...)
		rec := buildBatch(maintSchema, rows)
		appendFrags(t, st, writeFrag(t, st, ls, 0, rec))
		rec.Release()
	}
	all := encodedRows(maintSchema, native)
	if m := runNode(t, "maintain.mjs", dir, "pc", "--index"); !hasIndex(m, "id_idx") {
		t.Fatalf("no id_idx: %s", brief(m))
	}
	if _, err := table.DeleteRows(ctx, st, addrsOf(t, openTable(t, st), "b-00"), "id = 'b-00'"); err != nil {
		t.Fatal(err)
	}
	live["b-00"] = false
	// The 200-row fragment meets TargetRows and has no deletions: only the
	// other one is rewritten.
	res, err := table.Compact(ctx, st, table.CompactOptions{TargetRows: 200})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 || res.Added != 1 || !res.Dataset.HasIndexSection() {
		t.Fatalf("compact: removed %d, added %d, index section %v; want 1, 1, true", res.Removed, res.Added, res.Dataset.HasIndexSection())
	}
	for _, c := range []struct {
		id    string
		found bool
	}{{"a-010", true}, {"b-10", true}, {"b-49", true}, {"b-00", false}} {
		doc := runNode(t, "check_index.mjs", dir, "pc", "--id", c.id)
		want := []any{}
		if c.found {
			want = []any{c.id}
		}
		if f := normalize(doc["found_ids"]); !reflect.DeepEqual(f, want) || num(t, doc, "count") != int64(len(want)) {
			t.Errorf("LanceDB lookup of %s: count %v, found %v; want %v", c.id, doc["count"], f, want)
		}
		if normalize(doc["uses_index"]) != true {
			t.Errorf("LanceDB lookup of %s does not use the index after a partial Go compaction", c.id)
		}
		stats, _ := normalize(doc["index_stats"]).(map[string]any)
		s, _ := stats["id_idx"].(map[string]any)
		if s["numIndexedRows"] != int64(200) || s["numUnindexedRows"] != int64(49) {
			t.Errorf("index stats %s, want 200 indexed and 49 unindexed rows", brief(s))
		}
	}
	doc := runNode(t, "dump.mjs", dir, "pc", "--where", "id >= 'b'", "--columns", "id", "--order-by-col", "id")
	var wantB []string
	for _, id := range idSet(live) {
		if id >= "b" {
			wantB = append(wantB, id)
		}
	}
	if num(t, doc, "count") != int64(len(wantB)) {
		t.Errorf("LanceDB count where id >= 'b': %v, want %d", doc["count"], len(wantB))
	}
	checkIDs(t, "LanceDB ids where id >= 'b'", ids(nodeRows(t, doc)), wantB)
	agree(t, "after partial Go compaction", dir, "pc", st, all, idSet(live))
}
