package index

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"
)

// keyFilter is a Bloom filter over the values of one index segment, kept
// in memory only (derived data, rebuilt by each process; never written
// beside the index, whose files stay exactly Lance's). A batch lookup of
// keys that are mostly absent, the merge's check for rows that new rows
// supersede, then reads no index page for them: without it a merge of
// 1,000 new ids into a 10M-row table read about 1,000 index pages that no
// earlier lookup had cached.
//
// It is a split block Bloom filter (Parquet's): a key sets one bit in each
// of the eight words of one 32-byte block, so adding or testing a key
// touches one cache line (a plain Bloom filter's seven probes of a 12 MB
// array cost seven cache misses a key: 2.5 s to fill one for 10M keys).
type keyFilter struct {
	blocks [][8]uint32
}

// keyFilterBits is the filter's bits per key: about 1% false positives.
const keyFilterBits = 10

// blockSalts are the split block filter's odd multipliers, one per word.
var blockSalts = [8]uint32{0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31}

// keyFilterMinRows is the smallest segment given a filter: a small
// segment's few pages stay cached, and its lookups read nothing anyway.
var keyFilterMinRows int64 = 1 << 16

// keyFilterMinValues is the smallest batch lookup that consults the
// filters (and has them built): single lookups find their page cached or
// read one.
const keyFilterMinValues = 32

// keySeed is this process's hash seed (filters never leave the process).
var keySeed = maphash.MakeSeed()

func newKeyFilter(keys int64) *keyFilter {
	return &keyFilter{blocks: make([][8]uint32, max(keys*keyFilterBits/256, 1))}
}

// block returns v's block and the hash that picks its bits.
func (f *keyFilter) block(v string) (*[8]uint32, uint32) {
	h := maphash.String(keySeed, v)
	return &f.blocks[(h>>32)*uint64(len(f.blocks))>>32], uint32(h)
}

func (f *keyFilter) add(v string) {
	b, h := f.block(v)
	for i, salt := range blockSalts {
		b[i] |= 1 << (h * salt >> 27)
	}
}

// mayHold is false only when the segment does not hold v.
func (f *keyFilter) mayHold(v string) bool {
	b, h := f.block(v)
	for i, salt := range blockSalts {
		if b[i]&(1<<(h*salt>>27)) == 0 {
			return false
		}
	}
	return true
}

func (f *keyFilter) size() int64 { return int64(len(f.blocks)) * 32 }

// filterBuilds marks the segments whose filter this process is building
// in the background, and bounds those builds to one at a time: each reads
// a whole segment's values.
var filterBuilds = struct {
	sync.Mutex
	running map[string]bool
	failed  map[string]filterFailure
	slot    chan struct{}
	wg      sync.WaitGroup // for tests
}{running: map[string]bool{}, failed: map[string]filterFailure{}, slot: make(chan struct{}, 1)}

// filterFailure holds back the next build of a segment whose filter build
// failed (a corrupt or vanished segment): each try reads all its values,
// and a merge asks on every pass. Lookups meanwhile read pages.
type filterFailure struct {
	next  time.Time
	delay time.Duration
}

// Retry delays after failed filter builds: doubling, within these bounds.
var filterRetryMin, filterRetryMax = 10 * time.Second, 10 * time.Minute

// keyFilter returns the segment's filter when this process has it. A
// segment worth one (keyFilterMinRows) that has none gets one built in
// the background from its pages, on a context the caller's end does not
// cancel; until then lookups read pages as they did.
func (t *BTree) keyFilter(ctx context.Context) *keyFilter {
	if t.cache == nil || t.rows < keyFilterMinRows {
		return nil
	}
	if f := t.cache.getFilter(t.uuid); f != nil {
		return f
	}
	filterBuilds.Lock()
	defer filterBuilds.Unlock()
	if filterBuilds.running[t.uuid] || time.Now().Before(filterBuilds.failed[t.uuid].next) {
		return nil
	}
	filterBuilds.running[t.uuid] = true
	filterBuilds.wg.Add(1)
	go func() {
		defer filterBuilds.wg.Done()
		filterBuilds.slot <- struct{}{}
		f, err := t.readKeyFilter(context.WithoutCancel(ctx))
		<-filterBuilds.slot
		if err == nil {
			t.cache.putFilter(t.uuid, f)
		}
		filterBuilds.Lock()
		defer filterBuilds.Unlock()
		delete(filterBuilds.running, t.uuid)
		if err == nil {
			delete(filterBuilds.failed, t.uuid)
			return
		}
		ff := filterBuilds.failed[t.uuid]
		ff.delay = min(max(2*ff.delay, filterRetryMin), filterRetryMax)
		ff.next = time.Now().Add(ff.delay)
		filterBuilds.failed[t.uuid] = ff
		slog.Warn("index key filter not built; lookups of this segment read its pages", "segment", t.uuid, "retry_in", ff.delay, "err", err)
	}()
	return nil
}

// readKeyFilter builds the segment's filter from its values, read a chunk
// of pages at a time (not through the page cache: one pass).
func (t *BTree) readKeyFilter(ctx context.Context) (*keyFilter, error) {
	f := newKeyFilter(t.rows)
	chunk := t.batchSize * 64
	for s := int64(0); s < t.rows; s += chunk {
		rec, err := t.pages.Read(ctx, []int32{t.valuesID}, s, min(s+chunk, t.rows))
		if err != nil {
			return nil, fmt.Errorf("lance/index: key filter of %s: %w", t.uuid, err)
		}
		if !isString(rec.Column(0).DataType()) {
			rec.Release()
			return nil, fmt.Errorf("%w: %s: values are %s", ErrCorrupt, t.uuid, rec.Column(0).DataType())
		}
		vals := strs(rec.Column(0))
		for i := range vals.Len() {
			if !vals.IsNull(i) {
				f.add(vals.value(i))
			}
		}
		rec.Release()
	}
	return f, nil
}
