package table

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/objstore"
)

// Indexes returns the index metadata of this version (the manifest's
// IndexSection), decoded. Fields this implementation does not model are
// kept by the protobuf runtime and written back unchanged by commits.
func (d *Dataset) Indexes() ([]*pb.IndexMetadata, error) {
	if d.indexSection == nil {
		return nil, nil
	}
	var is pb.IndexSection
	if err := proto.Unmarshal(d.indexSection, &is); err != nil {
		return nil, fmt.Errorf("%w: index section: %v", ErrCorrupt, err)
	}
	return is.Indices, nil
}

// Store returns the object store the table lives on.
func (d *Dataset) Store() objstore.Store { return d.store }

// DeletedRows returns the deleted row offsets of fragment id, or nil when
// it has none (or the fragment is not in this version).
func (d *Dataset) DeletedRows(ctx context.Context, id uint64) (*roaring.Bitmap, error) {
	for _, f := range d.Fragments() {
		if f.GetId() == id {
			return d.deletedRows(ctx, f)
		}
	}
	return nil, nil
}

// FragmentBitmap decodes an index's fragment bitmap (a serialized 32-bit
// Roaring bitmap of fragment ids).
func FragmentBitmap(idx *pb.IndexMetadata) (*roaring.Bitmap, error) {
	bm := roaring.New()
	if len(idx.GetFragmentBitmap()) == 0 {
		return bm, nil
	}
	if _, err := bm.ReadFrom(bytes.NewReader(idx.GetFragmentBitmap())); err != nil {
		return nil, fmt.Errorf("%w: index %q fragment bitmap: %v", ErrCorrupt, idx.GetName(), err)
	}
	return bm, nil
}

// EncodeFragmentBitmap serializes a fragment bitmap in the portable Roaring
// format Lance reads.
func EncodeFragmentBitmap(bm *roaring.Bitmap) ([]byte, error) {
	bm.RunOptimize()
	var buf bytes.Buffer
	if _, err := bm.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("lance/table: encode fragment bitmap: %w", err)
	}
	return buf.Bytes(), nil
}

// checkNoOverlap refuses an index segment (add, live fragments bm) that
// covers a fragment a kept segment of the same index (name and fields)
// already covers: two builds prepared against one version (a merge's, and
// the one after a compaction) both index the fragments it left unindexed,
// and the second to commit would make every row of them a duplicate entry
// of the index. It is a conflict: the loser removes its files (the winner
// covers the fragments).
func checkNoOverlap(kept []*pb.IndexMetadata, add *pb.IndexMetadata, bm *roaring.Bitmap) error {
	for _, idx := range kept {
		if idx.GetName() != add.GetName() || !slices.Equal(idx.GetFields(), add.GetFields()) {
			continue
		}
		other, err := FragmentBitmap(idx)
		if err != nil {
			return err
		}
		if both := roaring.And(other, bm); !both.IsEmpty() {
			return fmt.Errorf("%w: index %q already covers fragments %v", ErrConflict, add.GetName(), both.ToArray())
		}
	}
	return nil
}

// applyIndexChange returns the index section of the next version: latest's
// section minus the indexes whose uuid ch.IndexRemove names, plus
// ch.IndexAdd. Every added index's bitmap is narrowed to the fragments of
// the next version (frags): a fragment that a concurrent commit removed
// while the index was being built is no longer claimed, so the index never
// vouches for rows it does not hold. An index to remove that is already
// gone means a concurrent writer replaced it, and an added segment over a
// fragment a kept segment of its index covers means a concurrent writer
// indexed it (checkNoOverlap): both ErrConflict.
func applyIndexChange(section []byte, ch *Change, frags []*pb.DataFragment) ([]byte, error) {
	var is pb.IndexSection
	if section != nil {
		if err := proto.Unmarshal(section, &is); err != nil {
			return nil, fmt.Errorf("%w: index section: %v", ErrCorrupt, err)
		}
	}
	for _, u := range ch.IndexRemove {
		at := -1
		for i, idx := range is.Indices {
			if bytes.Equal(idx.GetUuid().GetUuid(), u) {
				at = i
				break
			}
		}
		if at < 0 {
			return nil, fmt.Errorf("%w: index %x no longer exists", ErrConflict, u)
		}
		is.Indices = append(is.Indices[:at], is.Indices[at+1:]...)
	}
	live := roaring.New()
	for _, f := range frags {
		live.Add(uint32(f.GetId()))
	}
	for _, add := range ch.IndexAdd {
		c := proto.Clone(add).(*pb.IndexMetadata)
		bm, err := FragmentBitmap(c)
		if err != nil {
			return nil, err
		}
		bm.And(live)
		if err := checkNoOverlap(is.Indices, c, bm); err != nil {
			return nil, err
		}
		if c.FragmentBitmap, err = EncodeFragmentBitmap(bm); err != nil {
			return nil, err
		}
		is.Indices = append(is.Indices, c)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(&is)
}
