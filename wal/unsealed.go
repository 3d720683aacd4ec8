package wal

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UnsealedSince reports whether the log of opts.Shard may hold entries
// that its manifest m has not sealed into a generation, and a time no
// later than the oldest of them was written. It is for collectors of
// objects that rows refer to (large payloads): a reference that is only
// in the log is in no generation and no base version yet.
//
// Object entries are put once, so an entry's modification time is when it
// was written. A segment log (local disk) is appended in place, so a
// segment's time says nothing of its oldest frame: any segment of the
// manifest's log epoch or later reports any with the zero time (which
// protects everything). The shard's live writer knows its own unsealed
// rows exactly (Writer.Tail): use that for one's own shard.
func UnsealedSince(ctx context.Context, opts Options, m *Manifest) (since time.Time, any bool, err error) {
	objs, err := opts.Store.List(ctx, shardDir(opts.Shard)+"wal/")
	if err != nil {
		return time.Time{}, false, fmt.Errorf("wal: list the log of shard %s: %w", opts.Shard, err)
	}
	for _, o := range objs {
		name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		p, err := strconv.ParseUint(strings.TrimSuffix(name, ".arrow"), 10, 64)
		if err != nil || p <= m.ReplayAfter {
			continue
		}
		if !any || o.ModTime.Before(since) {
			since, any = o.ModTime, true
		}
	}
	if dir, fsys := logPlace(&opts); dir != "" {
		segs, err := listSegments(fsys, dir, m.LogEpoch)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("wal: list the segments of shard %s: %w", opts.Shard, err)
		}
		if len(segs) > 0 {
			return time.Time{}, true, nil
		}
	}
	return since, any, nil
}
