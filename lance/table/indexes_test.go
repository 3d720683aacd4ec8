package table

import (
	"context"
	"errors"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/objstore"
)

func testIndex(t *testing.T, uuid byte, frags ...uint32) *pb.IndexMetadata {
	t.Helper()
	bm, err := EncodeFragmentBitmap(roaring.BitmapOf(frags...))
	if err != nil {
		t.Fatal(err)
	}
	m := &pb.IndexMetadata{Uuid: &pb.UUID{Uuid: []byte{uuid, 15: 0}}, Fields: []int32{0}, Name: "id_idx", FragmentBitmap: bm}
	// A field this implementation does not model, as a newer Lance might add.
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 999, protowire.BytesType), []byte("future")))
	return m
}

func commitIndex(ctx context.Context, st objstore.Store, add *pb.IndexMetadata, remove ...[]byte) (*Dataset, error) {
	return Commit(ctx, st, func(ctx context.Context, latest *Dataset) (*Change, error) {
		ch := &Change{Kind: KindCreateIndex, IndexRemove: remove}
		if add != nil {
			ch.IndexAdd = []*pb.IndexMetadata{add}
		}
		return ch, nil
	})
}

// TestIndexCommitNarrowsBitmapToLiveFragments: an index built while a
// compaction removed one of its fragments lands claiming only the
// fragments still in the version, keeps fields we do not model, and is
// carried by later commits; its transaction is a CreateIndex.
func TestIndexCommitNarrowsBitmapToLiveFragments(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMemory()
	newTable(t, st)
	appendRows(t, st, 0, 10)
	d := appendRows(t, st, 10, 20)
	ids := []uint32{uint32(d.Fragments()[0].GetId()), uint32(d.Fragments()[1].GetId()), 77}
	nd, err := commitIndex(ctx, st, testIndex(t, 1, ids...))
	if err != nil {
		t.Fatal(err)
	}
	if nd.Manifest().GetTransactionSection() == 0 {
		t.Fatal("no inline transaction")
	}
	appendRows(t, st, 20, 30)
	d, _ = Open(ctx, st)
	idxs, err := d.Indexes()
	if err != nil || len(idxs) != 1 {
		t.Fatalf("indexes after an append: %v %v", idxs, err)
	}
	bm, _ := FragmentBitmap(idxs[0])
	if got := bm.ToArray(); len(got) != 2 || got[0] != ids[0] || got[1] != ids[1] {
		t.Fatalf("bitmap %v, want the two live fragments %v (77 never existed)", got, ids[:2])
	}
	if u := idxs[0].ProtoReflect().GetUnknown(); len(u) == 0 {
		t.Fatal("an unknown IndexMetadata field was dropped")
	}
}

// TestIndexCommitConflictWhenReplacedIndexIsGone: replacing an index that
// a concurrent commit already replaced fails with ErrConflict and changes
// nothing.
func TestIndexCommitConflictWhenReplacedIndexIsGone(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMemory()
	newTable(t, st)
	d := appendRows(t, st, 0, 10)
	f := uint32(d.Fragments()[0].GetId())
	if _, err := commitIndex(ctx, st, testIndex(t, 1, f)); err != nil {
		t.Fatal(err)
	}
	if _, err := commitIndex(ctx, st, testIndex(t, 2, f), []byte{1, 15: 0}); err != nil {
		t.Fatal(err)
	}
	before, _ := Open(ctx, st)
	_, err := commitIndex(ctx, st, testIndex(t, 3, f), []byte{1, 15: 0})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("replacing a gone index: %v, want ErrConflict", err)
	}
	after, _ := Open(ctx, st)
	idxs, _ := after.Indexes()
	if after.Version() != before.Version() || len(idxs) != 1 || idxs[0].GetUuid().GetUuid()[0] != 2 {
		t.Fatalf("a failed index commit changed the table: version %d -> %d, %d indexes", before.Version(), after.Version(), len(idxs))
	}
}

// lyingFinder claims to cover every fragment and names fixed rows.
type lyingFinder struct{ rows map[uint64][]uint32 }

func (l lyingFinder) Find(ctx context.Context, d *Dataset, column string, values []string) (*roaring.Bitmap, map[uint64][]uint32, error) {
	bm := roaring.New()
	for _, f := range d.Fragments() {
		bm.Add(uint32(f.GetId()))
	}
	return bm, l.rows, nil
}

// TestScanThroughIndexRechecksPredicates: rows an index names are checked
// against every predicate, so a wrong row is never returned; an offset past
// the fragment is reported as corruption; covered fragments are not
// scanned for rows the index did not name.
func TestScanThroughIndexRechecksPredicates(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMemory()
	newTable(t, st)
	d := appendRows(t, st, 0, 10)
	frag := d.Fragments()[0].GetId()
	// Row 3 is "r3", not "r5": dropped. Row 5 is "r5": kept.
	got := scanIDs(t, d, ScanOptions{Where: []Eq{{Column: "id", Value: "r5"}}, Index: lyingFinder{map[uint64][]uint32{frag: {3, 5}}}})
	if len(got) != 1 || got[0] != "r5" {
		t.Fatalf("through a finder naming rows 3 and 5: %v, want [r5]", got)
	}
	// The finder names no row: the covered fragment is not scanned.
	if got := scanIDs(t, d, ScanOptions{Where: []Eq{{Column: "id", Value: "r5"}}, Index: lyingFinder{}}); len(got) != 0 {
		t.Fatalf("a covered fragment was scanned: %v", got)
	}
	err := d.Scan(ctx, ScanOptions{Where: []Eq{{Column: "id", Value: "r5"}}, Index: lyingFinder{map[uint64][]uint32{frag: {10}}}}, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an index naming row 10 of a 10-row fragment: %v, want ErrCorrupt", err)
	}
}
