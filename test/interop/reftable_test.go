package interop

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// refRecord is what make_ref_table.mjs (or this test) put in a store.
type refRecord struct {
	id, role, content string
	createdUS         int64
}

// TestReferenceTableRoundTrip: LanceDB 0.31 writes a store's base table in
// the reference system's column types (role dictionary<int8, utf8>,
// created_at timestamp[us] without a time zone) and registers it. Our
// rollout engine lists it, gets records (role and created_at right),
// filters on role, appends, merges twice and compacts; then LanceDB opens
// the table, counts every row, and reads role as a dictionary column and
// created_at as naive timestamps with the right values, the new rows too.
func TestReferenceTableRoundTrip(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	doc := runNode(t, "make_ref_table.mjs", dir, "exp")
	var want []refRecord
	for _, r := range doc["records"].([]any) {
		m := normalize(r).(map[string]any)
		want = append(want, refRecord{m["id"].(string), m["role"].(string), m["content"].(string), m["created_at_us"].(int64)})
	}
	if len(want) != 12 || num(t, doc, "fragments") != 2 {
		t.Fatalf("fixture: %d records, %d fragments", len(want), num(t, doc, "fragments"))
	}

	root, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	// LanceDB's dictionary pages have the shape our writer writes.
	checkRefPageShape(t, objstore.Sub(root, "exp.rollout.lance"))

	c := rollout.NewCatalog(root, rollout.ShardID("interop-ref"), rollout.Options{})
	defer c.Close(ctx)
	names, err := c.List(ctx)
	if err != nil || !slices.Equal(names, []string{"exp"}) {
		t.Fatalf("catalog lists %v, %v", names, err)
	}
	s, err := c.Open(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	checkGets := func(when string, recs []refRecord) {
		t.Helper()
		for _, w := range recs {
			got, err := s.Get(ctx, w.id)
			if err != nil {
				t.Fatalf("%s: get %s: %v", when, w.id, err)
			}
			wantAt := time.UnixMicro(w.createdUS).UTC()
			if got.Role != w.role || got.CreatedAt == nil || !got.CreatedAt.Equal(wantAt) || got.CreatedAt.Location() != time.UTC ||
				got.Content == nil || *got.Content != w.content {
				t.Fatalf("%s: %s: role %q created_at %v content %v; want %q %v %q", when, w.id, got.Role, got.CreatedAt, got.Content, w.role, wantAt, w.content)
			}
		}
	}
	checkGets("LanceDB's rows", want)
	var tools []string
	for _, w := range want {
		if w.role == "tool" {
			tools = append(tools, w.id)
		}
	}
	sort.Strings(tools)
	if got := listAllIDs(t, s, rollout.ListOptions{Filters: []rollout.Filter{{Column: "role", Value: "tool"}}}); !slices.Equal(got, tools) {
		t.Fatalf("role=tool lists %v, want %v", got, tools)
	}

	// Append, merge, append again (roles the table's dictionaries do not
	// hold), merge, compact.
	base := time.Date(2026, 3, 1, 8, 0, 0, 250000000, time.UTC)
	var added []refRecord
	add := func(prefix string, roles ...string) {
		var recs []rollout.Record
		for i, role := range roles {
			at := base.Add(time.Duration(len(added)) * time.Minute)
			w := refRecord{fmt.Sprintf("%s-%d", prefix, i), role, "go " + prefix, at.UnixMicro()}
			added = append(added, w)
			recs = append(recs, rollout.Record{ID: w.id, RolloutID: "go", Role: role, CreatedAt: &at, Content: &w.content})
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	add("go-a", "assistant", "tool", "user", "system")
	add("go-b", "grade", "critic", "tool")
	checkRefPageShape(t, s.Root()) // LanceDB's fragments and our merged ones
	if _, err := s.Compact(ctx, rollout.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	checkRefPageShape(t, s.Root())
	all := slices.Concat(want, added)
	checkGets("after merges and compaction", all)
	d, err := table.Open(ctx, s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Schema().Field("role").LogicalType; got != "dict:string:int8:false" {
		t.Fatalf("role is %s in the table after compaction", got)
	}
	if got := d.Schema().Field("created_at").LogicalType; got != "timestamp:us:-" {
		t.Fatalf("created_at is %s in the table after compaction", got)
	}

	// LanceDB reads the whole table in its types.
	out := runNode(t, "dump.mjs", dir, "exp.rollout", "--columns", "id,role,created_at", "--order-by-col", "id")
	if n := num(t, out, "count"); n != int64(len(all)) {
		t.Fatalf("LanceDB counts %d rows, want %d", n, len(all))
	}
	if f := num(t, out, "fragments"); f != 1 {
		t.Fatalf("LanceDB sees %d fragments after compaction", f)
	}
	types := map[string]string{}
	for _, f := range out["schema"].([]any) {
		m := f.(map[string]any)
		types[m["name"].(string)] = m["type"].(string)
	}
	if types["role"] != "dictionary<values=string, indices=int8>" || types["created_at"] != "timestamp[us]" {
		t.Fatalf("LanceDB schema: role %q, created_at %q", types["role"], types["created_at"])
	}
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	rows := nodeRows(t, out)
	var wantRows []row
	for _, w := range all {
		wantRows = append(wantRows, row{"id": w.id, "role": w.role, "created_at": w.createdUS})
	}
	compareRows(t, "LanceDB rows", rows, wantRows)
	if n := num(t, runNode(t, "dump.mjs", dir, "exp.rollout", "--where", "role = 'tool'", "--no-rows"), "count"); n != int64(len(tools)+2) {
		t.Fatalf("LanceDB counts %d rows with role = 'tool', want %d", n, len(tools)+2)
	}
}

func listAllIDs(t *testing.T, s *rollout.Store, o rollout.ListOptions) []string {
	t.Helper()
	o.Limit = 1000
	res, err := s.List(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res.Records {
		ids = append(ids, r.ID)
	}
	return ids
}

// checkRefPageShape asserts LanceDB stores the role column of every data
// file as lance/file writes dictionary columns: a Dictionary of 8-bit keys
// (Nullable.no_nulls, buffer 0) and Binary items (buffers 1 and 2), with no
// Nullable around it.
func checkRefPageShape(t *testing.T, st objstore.Store) {
	t.Helper()
	d := openTable(t, st)
	role := d.Schema().Field("role")
	for _, f := range d.Fragments() {
		for _, e := range pageEncodings(t, st, f.GetFiles()[0], role.ID) {
			de := e.GetDictionary()
			if de == nil {
				t.Fatalf("role page is %v, want a dictionary", e)
			}
			adj := de.GetItems().GetBinary().GetNullAdjustment()
			wantEnc := &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Dictionary{Dictionary: &pb.Dictionary{
				Indices: noNulls(flat(8, 0)),
				Items: &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Binary{Binary: &pb.Binary{
					Indices: noNulls(flat(64, 1)), Bytes: flat(8, 2), NullAdjustment: adj,
				}}},
				NumDictionaryItems: de.GetNumDictionaryItems(),
			}}}
			if !proto.Equal(e, wantEnc) {
				t.Fatalf("LanceDB's role page\n  %v\nwant the shape\n  %v", e, wantEnc)
			}
		}
	}
}

func flat(bits uint64, buf uint32) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Flat{Flat: &pb.Flat{
		BitsPerValue: bits, Buffer: &pb.Buffer{BufferIndex: buf, BufferType: pb.Buffer_page},
	}}}
}

func noNulls(v *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_NoNulls{NoNulls: &pb.Nullable_NoNull{Values: v}},
	}}}
}
