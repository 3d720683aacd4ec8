package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout/row"
)

var (
	refRole    = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	refCreated = &arrow.TimestampType{Unit: arrow.Microsecond}
)

// refArrowSchema is Schema in the reference system's column types: role a
// dictionary<int8, utf8>, created_at a timestamp[us] without a time zone.
func refArrowSchema() *arrow.Schema {
	fields := Schema.Fields()
	for i := range fields {
		switch fields[i].Name {
		case ColRole:
			fields[i].Type = refRole
		case ColCreatedAt:
			fields[i].Type = refCreated
		}
	}
	return arrow.NewSchema(fields, nil)
}

// makeRefStore creates store name under root with a base table in the
// reference's column types holding rs (one fragment), registered in the
// catalog the way Create registers stores.
func makeRefStore(t *testing.T, root objstore.Store, name string, rs []Record) {
	t.Helper()
	ctx := context.Background()
	ls, err := schema.FromArrow(refArrowSchema(), 0)
	if err != nil {
		t.Fatal(err)
	}
	st := objstore.Sub(root, name+storeSuffix)
	if _, err := table.Create(ctx, st, ls, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := row.Prepare(rs, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := buildBatch(rs) // Schema's types; the table stores its own
	defer rec.Release()
	frag, err := table.WriteFragment(ctx, st, ls, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Append(ctx, st, []*pb.DataFragment{frag}, nil); err != nil {
		t.Fatal(err)
	}
	if err := root.Put(ctx, registryDir+name, nil); err != nil {
		t.Fatal(err)
	}
}

// checkRefTypes asserts the store's base table still has the reference's
// column types and every row's role reads back as a dictionary value (64
// rows a batch: at most 64 distinct roles, within what int8 keys address).
func checkRefTypes(t *testing.T, s *Store, wantRows int64) {
	t.Helper()
	d, err := table.Open(context.Background(), s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if !arrow.TypeEqual(d.Schema().Field(ColRole).Type, refRole) || !arrow.TypeEqual(d.Schema().Field(ColCreatedAt).Type, refCreated) {
		t.Fatalf("base table types changed: role %s, created_at %s", d.Schema().Field(ColRole).Type, d.Schema().Field(ColCreatedAt).Type)
	}
	var n int64
	err = d.Scan(context.Background(), table.ScanOptions{Columns: []string{ColRole, ColCreatedAt}, BatchRows: 64}, func(b arrow.RecordBatch) error {
		if _, ok := b.Column(0).(*array.Dictionary); !ok {
			return fmt.Errorf("role read as %s", b.Column(0).DataType())
		}
		if !arrow.TypeEqual(b.Column(1).DataType(), refCreated) {
			return fmt.Errorf("created_at read as %s", b.Column(1).DataType())
		}
		n += b.NumRows()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != wantRows {
		t.Fatalf("base table has %d rows, want %d", n, wantRows)
	}
}

// TestReferenceTypedStore: a store whose base table has the reference's
// column types opens as it is, reads role and created_at (as UTC) right,
// filters on role, appends, merges (a generation with more distinct roles
// than int8 keys address included) and compacts; the table keeps its types
// throughout, and Scan still returns Schema's types.
func TestReferenceTypedStore(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	base := time.Date(2026, 1, 1, 12, 0, 0, 123456000, time.UTC)
	roles := []string{"assistant", "tool", "grade", "artifact", "tool"}
	var rs []Record
	for i, role := range roles {
		at := base.Add(time.Duration(i) * time.Second)
		rs = append(rs, Record{ID: fmt.Sprintf("ref-%d", i), RolloutID: "r0", Role: role, CreatedAt: &at, SequenceOrder: int32(i)})
	}
	makeRefStore(t, root, "ref", rs)

	c := newCatalog(t, root, "a", Options{})
	names, err := c.List(ctx)
	if err != nil || !slices.Equal(names, []string{"ref"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	s := mustStore(t, c, "ref")
	checkRefTypes(t, s, 5)
	got, err := s.Get(ctx, "ref-3")
	if err != nil {
		t.Fatal(err)
	}
	if got.Role != "artifact" || got.CreatedAt == nil || !got.CreatedAt.Equal(base.Add(3*time.Second)) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("ref-3: role %q created_at %v", got.Role, got.CreatedAt)
	}
	if ids := listIDs(t, s, ListOptions{Filters: []Filter{{ColRole, "tool"}}}); !slices.Equal(ids, []string{"ref-1", "ref-4"}) {
		t.Fatalf("role=tool lists %v", ids)
	}

	// 200 new rows with 150 distinct roles: more than int8 keys address.
	var more []Record
	for i := range 200 {
		at := base.Add(time.Hour + time.Duration(i)*time.Millisecond)
		more = append(more, Record{ID: fmt.Sprintf("new-%03d", i), RolloutID: "r1", Role: fmt.Sprintf("role-%03d", i%150), CreatedAt: &at})
	}
	more = append(more, Record{ID: "ref-4", RolloutID: "r0", Role: "grade"}) // supersedes a base row
	appendFlush(t, s, more)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	checkRefTypes(t, s, 205)
	check := func(when string) {
		t.Helper()
		res, err := s.List(ctx, ListOptions{Source: SourceAll, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 205 {
			t.Fatalf("%s: %d records", when, len(res.Records))
		}
		for _, r := range res.Records {
			var want string
			var at time.Time
			switch {
			case r.ID == "ref-4":
				want = "grade"
			case r.ID[:4] == "ref-":
				var i int
				fmt.Sscanf(r.ID, "ref-%d", &i)
				want, at = roles[i], base.Add(time.Duration(i)*time.Second)
			default:
				var i int
				fmt.Sscanf(r.ID, "new-%d", &i)
				want, at = fmt.Sprintf("role-%03d", i%150), base.Add(time.Hour+time.Duration(i)*time.Millisecond)
			}
			if r.Role != want || r.CreatedAt == nil || (!at.IsZero() && !r.CreatedAt.Equal(at)) {
				t.Fatalf("%s: %s: role %q created_at %v, want %q %v", when, r.ID, r.Role, r.CreatedAt, want, at)
			}
		}
		if ids := listIDs(t, s, ListOptions{Source: SourceAll, Filters: []Filter{{ColRole, "role-007"}}}); !slices.Equal(ids, []string{"new-007", "new-157"}) {
			t.Fatalf("%s: role=role-007 lists %v", when, ids)
		}
	}
	check("after merge")
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	checkRefTypes(t, s, 205)
	check("after compaction")

	// Scan hands out Schema's types whatever the table stores.
	err = s.Scan(ctx, ScanOptions{Columns: []string{ColID, ColRole, ColCreatedAt}}, func(b arrow.RecordBatch) error {
		if !arrow.TypeEqual(b.Column(1).DataType(), arrow.BinaryTypes.String) || !arrow.TypeEqual(b.Column(2).DataType(), Schema.Field(schemaIndex[ColCreatedAt]).Type) {
			return fmt.Errorf("scan types %s", b.Schema())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
