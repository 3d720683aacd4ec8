package table

import (
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

// TestBuildVersion checks the manifest builder alone, without a store:
// fragment ids, placement, the stamp, the transaction and its file name,
// conflicts, and that latest and the change are left as they were.
func TestBuildVersion(t *testing.T) {
	now := time.Unix(1700000000, 123)
	maxID := uint32(5)
	latest := &Dataset{
		manifest: &pb.Manifest{Version: 7, MaxFragmentId: &maxID, Fragments: []*pb.DataFragment{
			{Id: 0, PhysicalRows: 10}, {Id: 3, PhysicalRows: 20}, {Id: 4, PhysicalRows: 30},
		}},
		schema: &schema.Schema{},
	}
	before := proto.Clone(latest.manifest)
	frag := func(rows uint64) *pb.DataFragment { return &pb.DataFragment{PhysicalRows: rows} }
	ids := func(m *pb.Manifest) (out []uint64) {
		for _, f := range m.GetFragments() {
			out = append(out, f.GetId())
		}
		return out
	}
	for _, c := range []struct {
		name    string
		ch      *Change
		ids     []uint64 // fragments of the new version, in order
		maxID   uint32
		op      string
		wantErr error
	}{
		{name: "append", ch: &Change{Kind: KindAppend, New: []*pb.DataFragment{frag(1), frag(2)}}, ids: []uint64{0, 3, 4, 6, 7}, maxID: 7, op: "append"},
		{name: "rewrite places new where the first removed was", ch: &Change{Kind: KindRewrite, Removed: []uint64{3, 4}, New: []*pb.DataFragment{frag(50)}},
			ids: []uint64{0, 6}, maxID: 6, op: "rewrite"},
		{name: "update replaces in place", ch: &Change{Kind: KindDelete, Updated: []*pb.DataFragment{{Id: 3, PhysicalRows: 20, DeletionFile: &pb.DeletionFile{}}}},
			ids: []uint64{0, 3, 4}, maxID: 5, op: "delete"},
		{name: "updated fragment gone", ch: &Change{Kind: KindDelete, Updated: []*pb.DataFragment{{Id: 9}}}, wantErr: ErrConflict},
		{name: "removed fragment gone", ch: &Change{Kind: KindRewrite, Removed: []uint64{2}}, wantErr: ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			chBefore := make([]*pb.DataFragment, len(c.ch.New))
			for i, f := range c.ch.New {
				chBefore[i] = proto.Clone(f).(*pb.DataFragment)
			}
			nv, err := buildVersion(latest, c.ch, now, "txn-1")
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := nv.manifest
			if got := ids(m); !slices.Equal(got, c.ids) {
				t.Errorf("fragments %v, want %v", got, c.ids)
			}
			if m.GetVersion() != 8 || m.GetMaxFragmentId() != c.maxID {
				t.Errorf("version %d max fragment id %d, want 8 and %d", m.GetVersion(), m.GetMaxFragmentId(), c.maxID)
			}
			if m.GetTransactionFile() != "7-txn-1.txn" || nv.txn.GetUuid() != "txn-1" || nv.txn.GetReadVersion() != 7 {
				t.Errorf("transaction file %q, uuid %q, read version %d", m.GetTransactionFile(), nv.txn.GetUuid(), nv.txn.GetReadVersion())
			}
			if ts := m.GetTimestamp(); ts.GetSeconds() != now.Unix() || ts.GetNanos() != int32(now.Nanosecond()) {
				t.Errorf("timestamp %v, want %v", ts, now)
			}
			var op string
			switch nv.txn.GetOperation().(type) {
			case *pb.Transaction_Append_:
				op = "append"
			case *pb.Transaction_Rewrite_:
				op = "rewrite"
			case *pb.Transaction_Delete_:
				op = "delete"
			}
			if op != c.op {
				t.Errorf("transaction operation %T, want %s", nv.txn.GetOperation(), c.op)
			}
			if c.op == "delete" && (m.GetReaderFeatureFlags()&FlagDeletionFiles == 0) {
				t.Error("a deletion file without the deletion-files feature flag")
			}
			again, err := buildVersion(latest, c.ch, now, "txn-1")
			if err != nil || !proto.Equal(again.manifest, m) || !proto.Equal(again.txn, nv.txn) {
				t.Errorf("a second build with the same inputs differs (%v)", err)
			}
			if !proto.Equal(latest.manifest, before) {
				t.Error("the build changed latest's manifest")
			}
			for i, f := range c.ch.New {
				if !proto.Equal(f, chBefore[i]) {
					t.Errorf("the build changed the change's new fragment %d", i)
				}
			}
		})
	}
}
