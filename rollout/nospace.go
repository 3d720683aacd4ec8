package rollout

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
	"github.com/lance-context/lance-context/wal"
)

// ErrNoSpace is wrapped by writes (appends, flushes, merges) that failed
// because the disk or quota holding the store is full: ENOSPC, EDQUOT
// (objstore.ErrNoSpace, vfs.ErrNoSpace). Nothing is wrong with the store:
// the write stored nothing, and writes resume as soon as there is room,
// without a restart.
var ErrNoSpace = objstore.ErrNoSpace

// IsNoSpace reports whether err says the disk or quota is full.
func IsNoSpace(err error) bool { return vfs.IsNoSpace(err) }

// noSpaceError says which store's write found the disk full, and what to
// do.
type noSpaceError struct {
	store string
	err   error
}

func (e *noSpaceError) Error() string {
	return fmt.Sprintf("store %q: no space left on the disk (or quota) that holds its data: free space there or grow the volume; "+
		"writes resume as soon as there is room: %v", e.store, e.err)
}

func (e *noSpaceError) Unwrap() error { return e.err }

// fullState is a store whose writes found the disk full.
type fullState struct {
	err   error
	since time.Time
	// claimFailed is when a claim of the shard last failed for lack of
	// space (zero: none since the disk filled).
	claimFailed atomic.Int64
}

// fullClaimInterval is the least time between two claims of a store's
// shard while its disk is full: each claim commits a manifest version,
// and a claim that then fails to seal what it replayed must not be
// repeated by every append.
const fullClaimInterval = time.Second

// noteSpace records the outcome of a write: a full disk marks the store
// full (logged once, on the metric and in health) and the error says so;
// success clears it. Other errors pass unchanged.
func (s *Store) noteSpace(err error) error {
	if err == nil {
		if s.health.full.Swap(nil) != nil {
			s.opts.metrics.storageFull.WithLabelValues(s.name).Set(0)
			s.opts.Logger.Info("rollout: space available again; writes resume", "store", s.name)
		}
		return nil
	}
	if !vfs.IsNoSpace(err) {
		return err
	}
	var ne *noSpaceError
	if !errors.As(err, &ne) {
		err = &noSpaceError{store: s.name, err: err}
	}
	prev := s.health.full.Load()
	if prev != nil {
		return err
	}
	f := &fullState{err: err, since: time.Now()}
	if s.health.full.CompareAndSwap(nil, f) {
		s.opts.metrics.storageFull.WithLabelValues(s.name).Set(1)
		s.opts.Logger.Error("rollout: disk full; writes to the store fail until space is freed", "store", s.name, "shard", s.shard, "err", err)
	}
	return err
}

// noteClaimNoSpace records a claim that failed for lack of space.
func (s *Store) noteClaimNoSpace(err error) {
	if !vfs.IsNoSpace(err) {
		return
	}
	_ = s.noteSpace(err)
	if f := s.health.full.Load(); f != nil {
		f.claimFailed.Store(time.Now().UnixNano())
	}
}

// admitSpace decides whether a claim of the shard may run while the
// store is known to be full (s.mu held): not within fullClaimInterval of
// a claim that failed for lack of space, nor while the segment log has
// no room for its first segment (wal.CheckSpace). So a full disk costs
// no new epochs, and the first write after space is freed claims.
func (s *Store) admitSpace() error {
	f := s.health.full.Load()
	if f == nil {
		return nil
	}
	if t := f.claimFailed.Load(); t != 0 && time.Since(time.Unix(0, t)) < fullClaimInterval {
		return f.err
	}
	if err := wal.CheckSpace(s.walOptions()); err != nil {
		return s.noteSpace(err)
	}
	return nil
}

// StorageFull is api.StorageFull: a store whose writes find its disk full.
type StorageFull = api.StorageFull

// Full returns the store's full-disk condition, or nil.
func (s *Store) Full() *StorageFull {
	f := s.health.full.Load()
	if f == nil {
		return nil
	}
	return &StorageFull{Store: s.name, Since: f.since, Error: f.err.Error()}
}

// Full returns the open stores whose writes find their disk full.
func (c *Catalog) Full() []StorageFull {
	var out []StorageFull
	for _, s := range c.Opened() {
		if f := s.Full(); f != nil {
			out = append(out, *f)
		}
	}
	return out
}
