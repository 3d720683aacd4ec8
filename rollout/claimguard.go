package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/wal"
)

// ErrClaimedElsewhere is returned (in a *ClaimedElsewhereError) for the
// writes of a store whose shard another live process holds: two workers
// run with one instance id on one data directory. Each would fence the
// other at every write and claim the shard back, so the store refuses
// writes instead, and says so (error, log, metric, health).
var ErrClaimedElsewhere = errors.New("rollout: shard claimed by another live process")

// ClaimedElsewhereError names the process that holds this process's
// shard of a store.
type ClaimedElsewhereError struct {
	Store, Shard string
	Instance     string    // this process's instance id ("" when not configured)
	Holder       wal.Owner // the other process
	Epoch        uint64    // its claim
	LastSign     time.Time // its last heartbeat or commit, by its clock
	TTL          time.Duration
}

func (e *ClaimedElsewhereError) Error() string {
	inst := e.Instance
	if inst == "" {
		inst = e.Holder.Instance
	}
	who := fmt.Sprintf("host %q", e.Holder.Host)
	if e.Holder.PID != 0 {
		who += fmt.Sprintf(", pid %d", e.Holder.PID)
	}
	return fmt.Sprintf("store %q refuses writes: its shard %s (instance id %q) is held by another live process (%s, epoch %d): "+
		"two workers run with INSTANCE_ID=%q on one data directory; give each worker its own INSTANCE_ID. "+
		"This worker takes the shard over only if that process stops renewing its heartbeat for %s",
		e.Store, e.Shard, inst, who, e.Epoch, inst, e.TTL)
}

func (e *ClaimedElsewhereError) Unwrap() error { return ErrClaimedElsewhere }

// processOwner is this process's id as a shard owner (wal.Owner.ID):
// catalogs of one process share it, so they take a shard from one another
// as before; another process with the same instance id has another.
var processOwner = uuid.NewString()

// claimGuard decides whether this process claims its shard of a store
// (admitClaim): part of storeHealth.
type claimGuard struct {
	fenced   atomic.Bool // a write was fenced since the last claim
	obs      holderObs   // guarded by Store.mu
	conflict atomic.Pointer[conflictState]
}

// holderObs is the last look at another process's hold on the shard.
type holderObs struct {
	valid    bool
	mark     wal.HolderMark
	deadline time.Time // taken for dead when still unchanged then
}

type conflictState struct {
	err     *ClaimedElsewhereError
	since   time.Time
	checked time.Time
}

// owner is this process as the wal records it.
func (s *Store) owner(merge bool) *wal.Owner {
	host, _ := os.Hostname()
	return &wal.Owner{ID: s.opts.OwnerID, Instance: s.opts.InstanceID, Host: host, PID: os.Getpid(), Merge: merge}
}

// admitClaim decides, before this process claims its shard (s.mu held),
// whether another live process holds it; the storage epoch still fences
// whoever loses, so this decides only who should write, never whether a
// write is safe.
//
// A holder that is this process, an orphan merge, a writer that records
// no owner, one that released the shard, or one whose last sign of life
// (heartbeat or commit) is older than its TTL is claimed from at once: an
// orphan merge is taken back as always, a crashed owner is replaced. Else
// the holder is live if it shows a sign of life after this process first
// looked: a claim that fenced this process's writer, a renewed heartbeat,
// a commit. Then the claim is refused with a *ClaimedElsewhereError,
// which is reported and checked again every heartbeat interval without
// holding requests. A holder unchanged until its TTL has run out (by this
// process's clock, from its first look) is dead: a worker restarted after
// kill -9 waits that long, at most the TTL, and takes over.
//
// seen, when set, is the holder as the caller just read it: the first look
// takes it instead of reading again.
func (s *Store) admitClaim(ctx context.Context, seen *wal.Holder) (*wal.Holder, error) {
	if err := s.admitSpace(); err != nil {
		return nil, err
	}
	g := &s.health.guard
	clk := s.opts.Clock
	fenced := g.fenced.Swap(false)
	if c := g.conflict.Load(); c != nil && !fenced && clk.Now().Sub(c.checked) < s.opts.HeartbeatInterval {
		return nil, c.err
	}
	for {
		h, err := seen, error(nil)
		if seen = nil; h == nil {
			h, err = wal.ReadHolder(ctx, s.root, s.shard)
		}
		if errors.Is(err, wal.ErrNoShard) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		now := clk.Now()
		ttl := h.TTL(s.opts.HeartbeatTTL)
		age := now.Sub(h.LastSign())
		if !h.Contends(s.opts.OwnerID) || age >= ttl {
			g.obs = holderObs{}
			return h, nil
		}
		mark := h.Mark()
		switch {
		case fenced:
			// Its claim fenced this process's writer just now.
			g.obs = holderObs{valid: true, mark: mark, deadline: now.Add(ttl)}
			return nil, s.refuseClaim(h, now, ttl)
		case g.obs.valid && g.obs.mark != mark:
			// It renewed its heartbeat or committed since the last look.
			g.obs = holderObs{valid: true, mark: mark, deadline: now.Add(ttl)}
			return nil, s.refuseClaim(h, now, ttl)
		case g.obs.valid && !now.Before(g.obs.deadline):
			s.opts.Logger.Warn("rollout: the process holding this shard stopped renewing its heartbeat; taking the shard over",
				"store", s.name, "shard", s.shard, "holder_host", h.Owner.Host, "holder_pid", h.Owner.PID, "epoch", h.Epoch)
			g.obs = holderObs{}
			return h, nil
		case !g.obs.valid:
			// The first look: what is left of its TTL, by its clock,
			// bounds the wait (a negative age, a clock behind ours, the
			// whole TTL).
			g.obs = holderObs{valid: true, mark: mark, deadline: now.Add(min(ttl, ttl-max(age, 0)))}
			s.opts.Logger.Info("rollout: another process holds this shard; waiting for a sign of life or for its heartbeat to expire",
				"store", s.name, "shard", s.shard, "holder_host", h.Owner.Host, "holder_pid", h.Owner.PID, "epoch", h.Epoch,
				"wait", g.obs.deadline.Sub(now))
		}
		if g.conflict.Load() != nil {
			// Known and reported: answer at once rather than hold a
			// request until the holder shows itself again.
			return nil, s.refuseClaim(h, now, ttl)
		}
		wait := min(g.obs.deadline.Sub(now), max(h.Interval(s.opts.HeartbeatInterval)/2, time.Millisecond))
		select {
		case <-clk.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// refuseClaim records and returns the refusal of a claim: the shard is
// held by the live process h names.
func (s *Store) refuseClaim(h *wal.Holder, now time.Time, ttl time.Duration) error {
	g := &s.health.guard
	e := &ClaimedElsewhereError{Store: s.name, Shard: s.shard, Instance: s.opts.InstanceID, Holder: *h.Owner,
		Epoch: h.Epoch, LastSign: h.LastSign(), TTL: ttl}
	prev := g.conflict.Load()
	c := &conflictState{err: e, since: now, checked: now}
	if prev != nil {
		c.since = prev.since
	}
	g.conflict.Store(c)
	s.opts.metrics.wal.ClaimsRefused.Inc()
	s.opts.metrics.claimedElsewhere.WithLabelValues(s.name).Set(1)
	if prev == nil {
		s.opts.Logger.Error("rollout: shard held by another live process; refusing writes to the store instead of claiming it back",
			"store", s.name, "shard", s.shard, "instance_id", s.opts.InstanceID, "holder_host", h.Owner.Host,
			"holder_pid", h.Owner.PID, "holder_instance", h.Owner.Instance, "epoch", h.Epoch, "err", e)
	}
	return e
}

// noteClaimed clears the claim state after a successful claim.
func (s *Store) noteClaimed() {
	g := &s.health.guard
	g.obs = holderObs{}
	g.fenced.Store(false)
	if g.conflict.Swap(nil) != nil {
		s.opts.metrics.claimedElsewhere.WithLabelValues(s.name).Set(0)
		s.opts.Logger.Info("rollout: shard claimed; the other process no longer holds it, writes resume", "store", s.name, "shard", s.shard)
	}
}

// noteFenced records that a write of this process was fenced: the next
// admitClaim takes that as the holder's sign of life.
func (s *Store) noteFenced(err error) {
	if errors.Is(err, wal.ErrFenced) {
		s.health.guard.fenced.Store(true)
	}
}

// ShardConflict is api.ShardConflict: this process's shard of a store is
// held by another live process.
type ShardConflict = api.ShardConflict

// Conflict returns the store's shard conflict, or nil.
func (s *Store) Conflict() *ShardConflict {
	c := s.health.guard.conflict.Load()
	if c == nil {
		return nil
	}
	e := c.err
	return &ShardConflict{Store: s.name, Shard: s.shard, InstanceID: e.Instance, HolderHost: e.Holder.Host, HolderPID: e.Holder.PID,
		HolderInstance: e.Holder.Instance, Epoch: e.Epoch, LastHeartbeat: e.LastSign, Since: c.since, Message: e.Error()}
}

// Conflicts returns the shard conflicts of the open stores.
func (c *Catalog) Conflicts() []ShardConflict {
	var out []ShardConflict
	for _, s := range c.Opened() {
		if x := s.Conflict(); x != nil {
			out = append(out, *x)
		}
	}
	return out
}

// walOptions are the options of this process's writer of its shard.
func (s *Store) walOptions() wal.Options {
	return wal.Options{
		Store: s.root, Shard: s.shard, Schema: Schema, KeyColumn: ColID, SeqColumn: ColSeq, Conform: conform,
		MaxMemtableRows: s.opts.MaxMemtableRows, MaxMemtableBytes: s.opts.MaxMemtableBytes,
		Logger: s.opts.Logger.With("store", s.name), Metrics: s.opts.metrics.wal,
		Log: s.log, BufferedLog: s.opts.BufferedLog,
		Owner: s.owner(false), HeartbeatInterval: s.opts.HeartbeatInterval, HeartbeatTTL: s.opts.HeartbeatTTL, Clock: s.opts.Clock,
	}
}
