package wal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// Owner identifies the process that claimed a shard. A claim records it in
// the manifest version it writes (later versions carry it on), and a
// writer with an Owner renews a heartbeat beside the manifest while it
// holds the shard (see doc.go, "Owners and heartbeats").
type Owner struct {
	// ID is unique per process (a random id): two processes with one
	// instance id have the same shard and different IDs.
	ID       string `json:"id"`
	Instance string `json:"instance,omitempty"` // the instance id it runs as
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	// Merge marks a claim made to merge a shard whose owner looked gone
	// (an orphan merge): it holds the shard for one pass, renews no
	// heartbeat, and the shard's owner takes it back when it writes.
	Merge bool `json:"merge,omitempty"`
}

// Heartbeat is the object a shard's owner renews while it holds the
// shard: _lc_wal/{shard}/heartbeat/{epoch:020d}.json. Only the writer of
// that epoch writes it, so a deposed writer never overwrites its
// successor's.
type Heartbeat struct {
	Owner     Owner     `json:"owner"`
	Epoch     uint64    `json:"epoch"`
	Seq       uint64    `json:"seq"` // renewals, from 1
	RenewedAt time.Time `json:"renewed_at"`
	// IntervalMillis is how often the owner renews it, TTLMillis how long
	// after RenewedAt without a renewal the owner may be taken for dead.
	IntervalMillis int64 `json:"interval_ms"`
	TTLMillis      int64 `json:"ttl_ms"`
	// Released: the owner closed the shard; nobody holds it.
	Released bool `json:"released,omitempty"`
}

// Heartbeat defaults (Options.HeartbeatInterval, Options.HeartbeatTTL).
const (
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultHeartbeatTTL      = 8 * time.Second
)

func heartbeatDir(shard string) string { return shardDir(shard) + "heartbeat/" }

func heartbeatKey(shard string, epoch uint64) string {
	return fmt.Sprintf("%s%020d.json", heartbeatDir(shard), epoch)
}

// heartbeater is a writer's heartbeat goroutine.
type heartbeater struct {
	stop    chan struct{}
	done    chan struct{}
	release atomic.Bool // on stop, mark the heartbeat released (Close)
	seq     atomic.Uint64
	written atomic.Uint64 // heartbeats written (renewals that succeeded)
}

// startHeartbeat writes the writer's first heartbeat and renews it in the
// background, when the writer has an Owner that is not a merge. A failed
// write is only logged: the heartbeat says whether a claim should wait or
// be refused, never whether a write is safe (the epoch does that).
func (w *Writer) startHeartbeat(ctx context.Context, side *sync.WaitGroup) {
	o := w.opts.Owner
	if o == nil || o.Merge {
		return
	}
	hb := &heartbeater{stop: make(chan struct{}), done: make(chan struct{})}
	w.hb = hb
	side.Go(func() { w.renewHeartbeat(ctx, false) })
	go w.heartbeat(hb)
}

// stopHeartbeat stops the heartbeat goroutine, which marks the heartbeat
// released first when release was asked for (a Close).
func (w *Writer) stopHeartbeat() {
	if w.hb == nil {
		return
	}
	select {
	case <-w.hb.stop:
	default:
		close(w.hb.stop)
	}
	<-w.hb.done
}

func (w *Writer) heartbeat(hb *heartbeater) {
	defer close(hb.done)
	w.sweepHeartbeats()
	clk := w.opts.Clock
	for {
		select {
		case <-hb.stop:
			if hb.release.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), w.opts.HeartbeatInterval)
				w.renewHeartbeat(ctx, true)
				cancel()
			}
			return
		case <-clk.After(w.opts.HeartbeatInterval):
		}
		if w.stopped.Load() {
			continue // fenced or failed: it holds nothing any more
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.HeartbeatInterval)
		w.renewHeartbeat(ctx, false)
		cancel()
	}
}

func (w *Writer) renewHeartbeat(ctx context.Context, released bool) {
	seq := w.hb.seq.Add(1)
	b, err := json.Marshal(Heartbeat{Owner: *w.opts.Owner, Epoch: w.epoch, Seq: seq, RenewedAt: w.opts.Clock.Now().UTC(),
		IntervalMillis: w.opts.HeartbeatInterval.Milliseconds(), TTLMillis: w.opts.HeartbeatTTL.Milliseconds(), Released: released})
	if err == nil {
		err = w.opts.Store.Put(ctx, heartbeatKey(w.opts.Shard, w.epoch), b)
	}
	if err == nil {
		w.hb.written.Add(1)
	}
	if err != nil {
		w.opts.Logger.Warn("wal: shard heartbeat not renewed", "shard", w.opts.Shard, "epoch", w.epoch, "err", err)
	}
}

// sweepHeartbeats deletes the heartbeats of earlier epochs (best effort;
// the next claim tries again).
func (w *Writer) sweepHeartbeats() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys, _, err := objstore.ListKeys(ctx, w.opts.Store, heartbeatDir(w.opts.Shard))
	if err != nil {
		return
	}
	for _, k := range keys {
		name, ok := strings.CutSuffix(strings.TrimPrefix(k, heartbeatDir(w.opts.Shard)), ".json")
		if e, err := strconv.ParseUint(name, 10, 64); ok && err == nil && e < w.epoch {
			_ = w.opts.Store.Delete(ctx, k)
		}
	}
}

// Heartbeats returns how many heartbeats the writer wrote (0 without an
// Owner).
func (w *Writer) Heartbeats() uint64 {
	if w.hb == nil {
		return 0
	}
	return w.hb.written.Load()
}

// Holder is what storage says about who holds a shard: the latest
// manifest's epoch and owner, and that epoch's heartbeat.
type Holder struct {
	Epoch     uint64
	Version   uint64    // the manifest version read
	UpdatedAt time.Time // when it was committed, by its writer's clock
	Owner     *Owner    // nil: a writer that records none
	Heartbeat *Heartbeat

	manifest *Manifest // read as a claim reads it (loadListedManifest)
}

// HolderMark changes whenever a holder shows a sign of life: a renewed
// heartbeat, a manifest commit, a new claim.
type HolderMark struct {
	Epoch, Version, Seq uint64
	Released            bool
}

// ReadHolder reads who holds a shard (ErrNoShard when nobody ever did).
// It finds the latest manifest by listing, as a claim does, so that a claim
// given the Holder (Options.Holder) builds on the manifest read here.
func ReadHolder(ctx context.Context, store objstore.Reader, shard string) (*Holder, error) {
	m, err := loadListedManifest(ctx, store, shard)
	if err != nil {
		return nil, err
	}
	h := &Holder{Epoch: m.Epoch, Version: m.Version, UpdatedAt: m.UpdatedAt, Owner: m.Owner, manifest: m}
	if m.Owner == nil || m.Owner.Merge {
		return h, nil
	}
	b, err := store.Get(ctx, heartbeatKey(shard, m.Epoch))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return h, nil // not written yet, or the owner crashed before it did
	case err != nil:
		return nil, fmt.Errorf("wal: read shard %s heartbeat: %w", shard, err)
	}
	hb := &Heartbeat{}
	if err := json.Unmarshal(b, hb); err != nil || hb.Epoch != m.Epoch {
		return h, nil // torn or foreign: as good as none
	}
	h.Heartbeat = hb
	return h, nil
}

// Contends reports whether a claim by the process self would take the
// shard from another process that may be alive: false when the holder
// is self, an orphan merge (its owner takes the shard back), a writer that
// records no owner, or has released the shard.
func (h *Holder) Contends(self string) bool {
	switch {
	case h.Owner == nil, h.Owner.Merge, h.Owner.ID == self:
		return false
	case h.Heartbeat != nil && h.Heartbeat.Released:
		return false
	}
	return true
}

// LastSign returns the holder's last sign of life by its own clock: its
// heartbeat's renewal, or its latest manifest commit, whichever is later.
func (h *Holder) LastSign() time.Time {
	t := h.UpdatedAt
	if h.Heartbeat != nil && h.Heartbeat.RenewedAt.After(t) {
		t = h.Heartbeat.RenewedAt
	}
	return t
}

// TTL returns how long the holder may go without a sign of life before it
// is taken for dead: what its heartbeat says, else def.
func (h *Holder) TTL(def time.Duration) time.Duration {
	if h.Heartbeat != nil && h.Heartbeat.TTLMillis > 0 {
		return time.Duration(h.Heartbeat.TTLMillis) * time.Millisecond
	}
	return def
}

// Interval returns how often the holder renews its heartbeat: what its
// heartbeat says, else def.
func (h *Holder) Interval(def time.Duration) time.Duration {
	if h.Heartbeat != nil && h.Heartbeat.IntervalMillis > 0 {
		return time.Duration(h.Heartbeat.IntervalMillis) * time.Millisecond
	}
	return def
}

// Mark returns what changes with each sign of life.
func (h *Holder) Mark() HolderMark {
	m := HolderMark{Epoch: h.Epoch, Version: h.Version}
	if h.Heartbeat != nil {
		m.Seq, m.Released = h.Heartbeat.Seq, h.Heartbeat.Released
	}
	return m
}
