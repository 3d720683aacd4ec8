package rollout

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lance-context/lance-context/objstore"
)

// A consumer group's ledger: how many times each key was served to it,
// durable in the store so that every process (and a restarted one) sees
// the same counts.
//
//	_lc_sample/{group}/{MaxUint64-seq, 20 digits}.json
//
// is a chain of entries, seq 1, 2, 3... with no gaps, each written
// put-if-absent: the writer of entry seq+1 drew its batch from the counts
// of entries 1..seq, and only one writer gets each name, so two samplers
// can never both serve from the same counts (a lost update). The loser
// reads the winner's entry and draws again. Entry names sort newest first,
// so a reader finds the newest entries in one listing of a few names.
//
// An entry holds the keys served by one call ("served", each counted
// once) and, every ledgerCheckpointEvery entries, the counts of every key
// after it ("counts", a checkpoint): a process that has not read the
// group reads the newest checkpoint and the entries after it (at most
// ledgerCheckpointEvery objects, in parallel), never the whole chain.
// Entries are never deleted (a deleted name could be written again by a
// stalled sampler whose put-if-absent would then succeed); they go with
// the store.
const (
	sampleDir             = "_lc_sample/"
	ledgerCheckpointEvery = 64
	ledgerMaxAttempts     = 32
)

type ledgerEntry struct {
	Seq        uint64            `json:"seq"`
	Served     []string          `json:"served"`
	Checkpoint bool              `json:"checkpoint,omitempty"`
	Counts     map[string]uint32 `json:"counts,omitempty"`
	Version    uint64            `json:"version"` // the base version the batch was drawn from
	At         time.Time         `json:"at"`
	Nonce      string            `json:"nonce"` // tells this writer's entry from another's with the same keys
}

func ledgerPrefix(group string) string { return sampleDir + group + "/" }

func ledgerKey(group string, seq uint64) string {
	return fmt.Sprintf("%s%020d.json", ledgerPrefix(group), math.MaxUint64-seq)
}

func parseLedgerKey(key string) (uint64, bool) {
	base, ok := strings.CutSuffix(path.Base(key), ".json")
	if !ok || len(base) != 20 {
		return 0, false
	}
	inv, err := strconv.ParseUint(base, 10, 64)
	if err != nil || inv == math.MaxUint64 {
		return 0, false
	}
	return math.MaxUint64 - inv, true
}

// ledger is this process's view of one consumer group's chain. mu
// serializes this process's samplers of the group (they would only
// conflict); other processes are kept off by put-if-absent.
type ledger struct {
	root  objstore.Store
	store string
	group string

	mu     sync.Mutex
	loaded bool
	seq    uint64 // the newest entry applied
	counts map[string]uint32
}

// serve draws a batch with draw (given the current counts; it returns the
// keys it served, each once) and records it as the next entry. A draw
// that another sampler's entry overtook is drawn again on the new counts.
// Nothing is recorded when draw serves nothing.
func (l *ledger) serve(ctx context.Context, s *Store, draw func(counts map[string]uint32) ([]string, error), version uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for attempt := 0; attempt < ledgerMaxAttempts; attempt++ {
		if !l.loaded {
			if err := l.load(ctx); err != nil {
				return err
			}
		}
		keys, err := draw(l.counts)
		if err != nil || len(keys) == 0 {
			return err
		}
		e := ledgerEntry{Seq: l.seq + 1, Served: keys, Version: version, At: time.Now().UTC(), Nonce: nonce()}
		next := l.counts
		if e.Seq%ledgerCheckpointEvery == 0 {
			next = maps.Clone(l.counts)
			for _, k := range keys {
				next[k]++
			}
			e.Checkpoint, e.Counts = true, next
		}
		err = l.put(ctx, &e)
		if errors.Is(err, objstore.ErrExists) {
			// Another sampler recorded entry seq+1 first: read it (and
			// any after it), then draw again.
			if err := l.catchUp(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			// The entry may or may not be stored: read the chain again
			// next time. Keys it holds count as served, never the reverse.
			l.loaded = false
			return fmt.Errorf("rollout: sample: record consumer group %q of store %s: %w", l.group, l.store, err)
		}
		if !e.Checkpoint { // else next holds them already
			for _, k := range keys {
				next[k]++
			}
		}
		l.counts, l.seq = next, e.Seq
		return nil
	}
	return fmt.Errorf("%w: consumer group %q of store %s: %d samplers in a row recorded their batch first; retry", ErrConflict, l.group, l.store, ledgerMaxAttempts)
}

func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// put writes e put-if-absent. The backends retry a failed put themselves;
// a retry that finds the name taken reads it back, and an entry equal to
// ours is our own earlier attempt whose acknowledgement was lost.
func (l *ledger) put(ctx context.Context, e *ledgerEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	key := ledgerKey(l.group, e.Seq)
	err = l.root.PutIfAbsent(ctx, key, b)
	if errors.Is(err, objstore.ErrExists) {
		got, gerr := l.root.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("rollout: sample: read back %s: %w", key, gerr)
		}
		if bytes.Equal(got, b) {
			return nil
		}
	}
	return err
}

func (l *ledger) get(ctx context.Context, seq uint64) (*ledgerEntry, error) {
	b, err := l.root.Get(ctx, ledgerKey(l.group, seq))
	if err != nil {
		return nil, err
	}
	var e ledgerEntry
	if err := json.Unmarshal(b, &e); err != nil || e.Seq != seq {
		return nil, fmt.Errorf("%w: consumer group %q of store %s: entry %s is not a ledger entry of seq %d (%v)",
			ErrCorrupt, l.group, l.store, ledgerKey(l.group, seq), seq, err)
	}
	return &e, nil
}

// apply adds an entry's served keys (or takes its checkpoint's counts).
func (l *ledger) apply(e *ledgerEntry) {
	if e.Checkpoint {
		l.counts = e.Counts
		if l.counts == nil {
			l.counts = map[string]uint32{}
		}
	} else {
		for _, k := range e.Served {
			l.counts[k]++
		}
	}
	l.seq = e.Seq
}

// catchUp applies the entries after l.seq until the first missing one.
func (l *ledger) catchUp(ctx context.Context) error {
	for {
		e, err := l.get(ctx, l.seq+1)
		if errors.Is(err, objstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			l.loaded = false
			return err
		}
		l.apply(e)
	}
}

// load reads the group's counts: the newest checkpoint and the entries
// after it, then whatever was written meanwhile.
func (l *ledger) load(ctx context.Context) error {
	l.loaded, l.seq, l.counts = false, 0, map[string]uint32{}
	objs, err := objstore.ListFirst(ctx, l.root, ledgerPrefix(l.group), 4)
	if err != nil {
		return fmt.Errorf("rollout: sample: list consumer group %q of store %s: %w", l.group, l.store, err)
	}
	var newest uint64
	for _, o := range objs {
		if seq, ok := parseLedgerKey(o.Key); ok {
			newest = max(newest, seq)
		}
	}
	if newest > 0 {
		// Among any ledgerCheckpointEvery consecutive entries one is a
		// checkpoint; below the first, the chain starts at 1.
		lo := uint64(1)
		if newest >= ledgerCheckpointEvery {
			lo = newest - newest%ledgerCheckpointEvery
		}
		entries := make([]*ledgerEntry, newest-lo+1)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for i := range entries {
			g.Go(func() error {
				var err error
				entries[i], err = l.get(gctx, lo+uint64(i))
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("rollout: sample: read consumer group %q of store %s: %w", l.group, l.store, err)
		}
		if lo > 1 && !entries[0].Checkpoint {
			return fmt.Errorf("%w: consumer group %q of store %s: entry %d is not a checkpoint", ErrCorrupt, l.group, l.store, lo)
		}
		for _, e := range entries {
			l.apply(e)
		}
	}
	if err := l.catchUp(ctx); err != nil {
		return err
	}
	l.loaded = true
	return nil
}
