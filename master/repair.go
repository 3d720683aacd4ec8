package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// lanceDataDir is where a Lance dataset keeps its data files (the paths
// of a fragment's files are relative to it).
const lanceDataDir = "data/"

// errNothingToRepair ends a repair commit attempt that found every data
// file in place.
var errNothingToRepair = errors.New("nothing to repair")

// repairStore drops, in one Lance commit (a delete of whole fragments),
// every base fragment of a store with a data file missing from storage, so
// that reads, merges and compactions stop failing on it. The rows of those
// fragments are gone already; the record says which fragments and how
// many rows. Run only when asked for: damage is reported, never repaired
// behind the operator's back.
func (m *Master) repairStore(ctx context.Context, name, taskID string) (*api.RepairRecord, error) {
	st, err := m.catalog.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	root := st.Root()
	rec := &api.RepairRecord{Target: name, TriggeredBy: "repair", TaskID: taskID}
	ds, err := table.Commit(ctx, root, func(ctx context.Context, latest *table.Dataset) (*table.Change, error) {
		rec.ReadVersion, rec.Dropped, rec.RowsDropped = latest.Version(), nil, 0
		var ids []uint64
		for _, f := range latest.Fragments() { // manifest order: the same answer every time
			var missing []string
			for _, df := range f.GetFiles() {
				key := lanceDataDir + df.GetPath()
				if _, err := root.Head(ctx, key); errors.Is(err, objstore.ErrNotFound) {
					missing = append(missing, key)
				} else if err != nil {
					return nil, fmt.Errorf("repair %s: check %s: %w", name, key, err)
				}
			}
			if len(missing) == 0 {
				continue
			}
			ids = append(ids, f.GetId())
			rec.Dropped = append(rec.Dropped, api.RepairedFragment{ID: f.GetId(), PhysicalRows: f.GetPhysicalRows(), MissingFiles: missing})
			rec.RowsDropped += f.GetPhysicalRows()
		}
		if len(ids) == 0 {
			return nil, errNothingToRepair
		}
		return &table.Change{Kind: table.KindDelete, Removed: ids, Predicate: "lance-context repair: fragments with missing data files"}, nil
	})
	now := time.Now()
	rec.AtMS, rec.RepairedAtMS = now.UnixMilli(), now.UnixMilli()
	if errors.Is(err, errNothingToRepair) {
		rec.Dropped, rec.CommittedVersion = []api.RepairedFragment{}, rec.ReadVersion
		rec.Detail = fmt.Sprintf("every data file of version %d is in place: nothing dropped", rec.ReadVersion)
		return rec, nil
	}
	if err != nil {
		return nil, err
	}
	rec.FragmentsDropped, rec.CommittedVersion = len(rec.Dropped), ds.Version()
	rec.Detail = fmt.Sprintf("dropped %d fragments (%d rows) with missing data files: version %d -> %d", rec.FragmentsDropped, rec.RowsDropped, rec.ReadVersion, rec.CommittedVersion)
	m.log.Warn("repaired store", "store", name, "fragments_dropped", rec.FragmentsDropped, "rows_dropped", rec.RowsDropped, "version", rec.CommittedVersion)
	if err := m.coord.RecordRepair(ctx, name, rec.AtMS, rec); err != nil {
		m.log.Warn("record repair", "store", name, "err", err)
	}
	return rec, nil
}
