package table

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/objstore"
)

func deletionKey(fragID uint64, df *pb.DeletionFile) string {
	ext := "arrow"
	if df.GetFileType() == pb.DeletionFile_BITMAP {
		ext = "bin"
	}
	return fmt.Sprintf("%s%d-%d-%d.%s", deletionsDir, fragID, df.GetReadVersion(), df.GetId(), ext)
}

// deletedRows returns the deleted row offsets of a fragment, or nil when it
// has no deletion file.
func (d *Dataset) deletedRows(ctx context.Context, f *pb.DataFragment) (*roaring.Bitmap, error) {
	df := f.GetDeletionFile()
	if df == nil {
		return nil, nil
	}
	key := deletionKey(f.GetId(), df)
	if bm, ok := d.files.deletion(d.store, key); ok {
		return bm, nil
	}
	b, err := d.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("lance/table: read deletion file: %w", err)
	}
	bm, err := decodeDeletionFile(df.GetFileType(), b)
	if err != nil {
		return nil, fmt.Errorf("lance/table: %s: %w", key, err)
	}
	d.files.putDeletion(d.store, key, bm)
	return bm, nil
}

func decodeDeletionFile(t pb.DeletionFile_DeletionFileType, b []byte) (*roaring.Bitmap, error) {
	bm := roaring.New()
	if t == pb.DeletionFile_BITMAP {
		if _, err := bm.ReadFrom(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("%w: roaring bitmap: %v", ErrCorrupt, err)
		}
		return bm, nil
	}
	r, err := ipc.NewFileReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: arrow deletion file: %v", ErrCorrupt, err)
	}
	defer r.Close()
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return nil, fmt.Errorf("%w: arrow deletion file: %v", ErrCorrupt, err)
		}
		if rec.NumCols() != 1 {
			return nil, fmt.Errorf("%w: arrow deletion file has %d columns", ErrCorrupt, rec.NumCols())
		}
		switch c := rec.Column(0).(type) {
		case *array.Int32:
			for _, v := range c.Int32Values() {
				bm.Add(uint32(v))
			}
		case *array.Uint32:
			bm.AddMany(c.Uint32Values())
		default:
			return nil, fmt.Errorf("%w: arrow deletion file column is %s", ErrCorrupt, c.DataType())
		}
	}
	return bm, nil
}

// writeDeletion writes a new deletion file for fragment f holding del (the
// union of old and new deletions) and returns the updated fragment.
func writeDeletion(ctx context.Context, d *Dataset, f *pb.DataFragment, del *roaring.Bitmap) (*pb.DataFragment, error) {
	del.RunOptimize()
	var buf bytes.Buffer
	if _, err := del.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("lance/table: encode deletion bitmap: %w", err)
	}
	df := &pb.DeletionFile{
		FileType:       pb.DeletionFile_BITMAP,
		ReadVersion:    d.Version(),
		Id:             rand.Uint64() >> 1,
		NumDeletedRows: del.GetCardinality(),
	}
	if err := d.store.Put(ctx, deletionKey(f.GetId(), df), buf.Bytes()); err != nil {
		return nil, fmt.Errorf("lance/table: write deletion file: %w", err)
	}
	nf := proto.Clone(f).(*pb.DataFragment)
	nf.DeletionFile = df
	return nf, nil
}

// RowAddr addresses one physical row: fragment id and row offset within it.
type RowAddr struct {
	Fragment uint64
	Offset   uint32
}

// Compare orders row addresses as the table stores its rows: by fragment,
// then offset.
func (a RowAddr) Compare(b RowAddr) int {
	if a.Fragment != b.Fragment {
		return cmp.Compare(a.Fragment, b.Fragment)
	}
	return cmp.Compare(a.Offset, b.Offset)
}

// DeleteRows marks rows deleted. Rows already deleted are ignored; a
// fragment whose rows all end up deleted is removed from the table. Against
// a concurrent commit it rebases, re-reading the latest deletion files.
func DeleteRows(ctx context.Context, store objstore.Store, rows []RowAddr, predicate string) (*Dataset, error) {
	return Commit(ctx, store, func(ctx context.Context, latest *Dataset) (*Change, error) {
		updated, removed, err := latest.PlanDeletes(ctx, rows)
		if err != nil {
			return nil, err
		}
		return &Change{Kind: KindDelete, Predicate: predicate, Updated: updated, Removed: removed}, nil
	})
}

// PlanDeletes writes the deletion files that delete rows from this version
// and returns the fragments to update and the ids of fragments left with no
// live rows, for a Change. Addresses outside the version are ignored.
func (d *Dataset) PlanDeletes(ctx context.Context, rows []RowAddr) (updated []*pb.DataFragment, removed []uint64, err error) {
	byFrag := map[uint64][]uint32{}
	for _, r := range rows {
		byFrag[r.Fragment] = append(byFrag[r.Fragment], r.Offset)
	}
	for _, f := range d.Fragments() {
		offs, ok := byFrag[f.GetId()]
		if !ok {
			continue
		}
		del, err := d.deletedRows(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		if del == nil {
			del = roaring.New()
		} else {
			del = del.Clone()
		}
		before := del.GetCardinality()
		for _, o := range offs {
			if uint64(o) < f.GetPhysicalRows() {
				del.Add(o)
			}
		}
		switch {
		case del.GetCardinality() == before:
		case del.GetCardinality() >= f.GetPhysicalRows():
			removed = append(removed, f.GetId())
		default:
			nf, err := writeDeletion(ctx, d, f, del)
			if err != nil {
				return nil, nil, err
			}
			updated = append(updated, nf)
		}
	}
	return updated, removed, nil
}

// dropFromIndexBitmaps removes fragment ids from every index's fragment
// bitmap, so an index never claims to cover rows it has not indexed; Lance
// scans fragments outside an index's bitmap instead.
func dropFromIndexBitmaps(section []byte, removed map[uint64]bool) ([]byte, error) {
	var is pb.IndexSection
	if err := proto.Unmarshal(section, &is); err != nil {
		return nil, fmt.Errorf("%w: index section: %v", ErrCorrupt, err)
	}
	for _, idx := range is.Indices {
		if len(idx.FragmentBitmap) == 0 {
			continue
		}
		bm := roaring.New()
		if _, err := bm.ReadFrom(bytes.NewReader(idx.FragmentBitmap)); err != nil {
			return nil, fmt.Errorf("%w: index fragment bitmap: %v", ErrCorrupt, err)
		}
		for id := range removed {
			bm.Remove(uint32(id))
		}
		var buf bytes.Buffer
		if _, err := bm.WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("lance/table: encode index bitmap: %w", err)
		}
		idx.FragmentBitmap = buf.Bytes()
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(&is)
}
