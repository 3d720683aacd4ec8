package wal

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// RepairReport is what Repair found in a shard's log and what it did (or,
// in a dry run, would do).
type RepairReport struct {
	Shard  string
	DryRun bool
	// Damage is where the log is corrupt; nil: the log replays whole and
	// nothing was changed.
	Damage *CorruptionError
	// Lost are the valid entries behind the damage, which the repair
	// drops: replay is dense and cannot reach them.
	Lost     []LostEntry
	LostRows int64
	// Actions lists the truncations and deletions, in order.
	Actions []string
}

// LostEntry is a valid entry that a repair drops.
type LostEntry struct {
	Position uint64
	Rows     int64  // -1: the frame is whole but its entry does not decode
	Where    string // segment file and offset, or object key
}

// Repair reads the log of shard (its entry objects in store, its segment
// files where log says) as a claim replays it and, if it finds damage (a
// *CorruptionError), truncates the log at the damage: object
// entries from the damaged position on are deleted; the damaged segment
// is cut at the damage, and every later segment file at its first frame
// at or beyond the damaged position. Everything before the damage stays
// and is replayed by the next claim; what is dropped is reported in Lost.
// With dryRun nothing is changed.
//
// Run it while no process writes the shard (a claim refuses a corrupt
// log, so a worker serving the store writes nothing to it meanwhile).
func Repair(ctx context.Context, store objstore.Store, log Log, shard string, dryRun bool) (*RepairReport, error) {
	return repair(ctx, store, log.FS, log.segmentDir(shard), shard, dryRun)
}

// repair is Repair of a segment log in segDir (none: "") on fsys.
func repair(ctx context.Context, store objstore.Store, fsys vfs.FS, segDir, shard string, dryRun bool) (*RepairReport, error) {
	m, err := loadListedManifest(ctx, store, shard)
	if err != nil {
		return nil, err
	}
	rep := &RepairReport{Shard: shard, DryRun: dryRun}
	check := func(pos uint64, b []byte) error {
		e, err := checkEntry(shard, pos, b)
		if err == nil {
			e.release()
		}
		return err
	}
	next, err := replayObjects(ctx, store, shard, m.ReplayAfter+1, check)
	var segs []segmentFile
	if segDir != "" {
		var lerr error
		if segs, lerr = listSegments(fsys, segDir, m.LogEpoch); lerr != nil {
			return nil, lerr
		}
	}
	if err == nil && segDir != "" {
		_, err = replaySegments(fsys, shard, segs, next, func(seg string, off int64, pos uint64, payload []byte) error {
			return placeCorruption(check(pos, payload), seg, off)
		})
	}
	if !errors.As(err, &rep.Damage) {
		return rep, err
	}
	p := rep.Damage.Position
	objectDamage := path.Ext(rep.Damage.Segment) == ".arrow"
	var apply []func() error
	if objectDamage {
		later, err := objectPositions(ctx, store, shard, p-1)
		if err != nil {
			return nil, err
		}
		for _, q := range later {
			key := entryKey(shard, q)
			if b, err := store.Get(ctx, key); err == nil {
				if e, err := checkEntry(shard, q, b); err == nil {
					rep.lose(q, entryRows(e), path.Base(key))
					e.release()
				}
			}
			rep.Actions = append(rep.Actions, "delete entry "+path.Base(key))
			apply = append(apply, func() error { return store.Delete(ctx, key) })
		}
	}
	// Segment files: the damaged one is cut at the damage; in it after
	// the damage and in every file after it, frames at or beyond p are
	// lost, and each such file is cut at its first one.
	damaged := -1 // object damage: every segment comes after it
	if !objectDamage {
		damaged = len(segs)
		for i, sf := range segs {
			if filepath.Base(sf.path) == rep.Damage.Segment {
				damaged = i
			}
		}
	}
	for i, sf := range segs {
		if i < damaged {
			continue
		}
		r, err := openSegment(fsys, sf.path)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		from, cut := int64(0), int64(-1)
		if i == damaged {
			from, cut = rep.Damage.Offset, rep.Damage.Offset
		}
		hi := positionBound([]*segReader{r}, p)
		for {
			off, pos, payload, found, err := r.find(from, p, hi)
			if err != nil {
				r.close()
				return nil, err
			}
			if !found {
				break
			}
			if cut < 0 {
				cut = off
			}
			rows := int64(-1)
			if e, err := checkEntry(shard, pos, payload); err == nil {
				rows = entryRows(e)
				e.release()
			}
			rep.lose(pos, rows, fmt.Sprintf("%s offset %d", r.name, off))
			from = off + frameHeaderSize + int64(len(payload))
		}
		r.close()
		if cut >= 0 {
			target, size := sf.path, cut
			rep.Actions = append(rep.Actions, fmt.Sprintf("truncate segment %s to %d bytes", filepath.Base(target), size))
			apply = append(apply, func() error { return truncateSync(fsys, target, size) })
		}
	}
	if dryRun {
		return rep, nil
	}
	for _, fn := range apply {
		if err := fn(); err != nil {
			return rep, fmt.Errorf("wal: repair shard %s: %w", shard, err)
		}
	}
	return rep, nil
}

func (r *RepairReport) lose(pos uint64, rows int64, where string) {
	r.Lost = append(r.Lost, LostEntry{Position: pos, Rows: rows, Where: where})
	if rows > 0 {
		r.LostRows += rows
	}
}

func entryRows(e *entry) int64 {
	var n int64
	for _, b := range e.batches {
		n += b.NumRows()
	}
	return n
}

// truncateSync cuts the file at p to size and flushes it.
func truncateSync(fsys vfs.FS, p string, size int64) error {
	f, err := fsys.OpenReadWrite(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}
