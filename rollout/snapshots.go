package rollout

// Snapshots: base versions that hold everything acknowledged before a call,
// for engines that read the base table alone (Ray, Spark, DuckDB's lance
// extension, LanceDB, pylance). Not to be confused with snapshot.go, the
// metadata a read of this package takes.
//
// A snapshot is a lease (lifecycle.go) on a base version plus a tag in
// Lance's format named SnapshotTagPrefix + the lease id, so the link from a
// tag to what keeps it is in the name: cleanup keeps the version while the
// lease lives, and ExpireSnapshotTags (run before every cleanup of the
// maintainer and the API) deletes the tag once the lease has expired or was
// released, after which the version is collectable like any other.
//
// What a snapshot holds (the promise): every row acknowledged by this
// process before the call (its memtable is sealed and its shard merged up
// to that seal), every row of shards no live process owns (merged by an
// orphan merge, whose claim replays their WAL), and whatever other live
// workers had merged before the base version was read. This process cannot
// seal another live worker's memtable, and claiming its shard would fence
// it mid-ingest; so when the caller gives SnapshotPeers (the worker does
// when it runs with etcd, where workers register their endpoints), the
// round asks each live owner of another shard to seal, then to merge until
// its watermark reaches that seal, and the version then holds what those
// workers acknowledged before the call too. A shard whose owner could not
// be reached, or every live shard with pending generations when there are
// no peers, is listed in the answer (ExcludedShards, with what its manifest
// held pending and, with peers, why), and a caller that needs those rows
// snapshots their workers: base versions are one linear history, so the
// highest version of those answers holds what each of them promised.
//
// Callers batch into rounds: a round seals, merges and reads the version
// once for every caller waiting for it. A caller arriving while a round
// runs joins the next one (the running round may have sealed before its
// rows were acknowledged), which starts when the running one ends; so any
// number of concurrent callers cost at most two rounds.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/wal"
)

// SnapshotTagPrefix starts every snapshot tag's name (api.SnapshotTagPrefix).
const SnapshotTagPrefix = api.SnapshotTagPrefix

// snapshotHolderPrefix marks a lease as a snapshot's (Lease.Holder).
const snapshotHolderPrefix = "snapshot"

// snapshotRoundTimeout bounds one round: it runs for its callers together,
// so no one caller's context ends it.
const snapshotRoundTimeout = 10 * time.Minute

// SnapshotInfo is a snapshot as this package knows it (the worker adds the
// URI of the wire type).
type SnapshotInfo struct {
	ID             string
	Version        uint64
	Tag            string
	ExpiresAt      time.Time
	Holder         string
	ExcludedShards []api.SnapshotShard
}

// snapRound is one round: its result is shared by the callers that joined
// it.
type snapRound struct {
	done     chan struct{}
	peers    SnapshotPeers // the first joiner's that had any
	version  uint64
	excluded []api.SnapshotShard
	err      error
}

// snapRounds is a store's round state: whether a round runs, and the round
// the callers arriving meanwhile wait for.
type snapRounds struct {
	mu      sync.Mutex
	running bool
	next    *snapRound
	rounds  int // rounds run (tests, benchmarks)
}

// rounds of each open store; kept beside Store (whose struct is shared)
// and dropped with nothing: a store handle lives as long as its catalog.
var storeRounds sync.Map // *Store -> *snapRounds

func (s *Store) snapRounds() *snapRounds {
	v, _ := storeRounds.LoadOrStore(s, &snapRounds{})
	return v.(*snapRounds)
}

// SnapshotRounds returns how many snapshot rounds this handle has run.
func (s *Store) SnapshotRounds() int {
	rs := s.snapRounds()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.rounds
}

// CreateSnapshot makes a snapshot (see the top of this file) kept for ttl,
// without asking other live workers to seal (CreateSnapshotWith does).
func (s *Store) CreateSnapshot(ctx context.Context, ttl time.Duration, holder string) (*SnapshotInfo, error) {
	return s.CreateSnapshotWith(ctx, ttl, holder, nil)
}

// CreateSnapshotWith makes a snapshot kept for ttl; with peers (not nil),
// the round asks the live owners of other shards to seal and merge what
// they acknowledged before it (see the top of this file).
func (s *Store) CreateSnapshotWith(ctx context.Context, ttl time.Duration, holder string, peers SnapshotPeers) (*SnapshotInfo, error) {
	if ttl <= 0 {
		return nil, invalid("a snapshot needs a positive time to live, got %v", ttl)
	}
	r := s.joinRound(peers)
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("rollout: snapshot of store %s: %w", s.name, ctx.Err())
	}
	if r.err != nil {
		return nil, r.err
	}
	l, err := s.TakeLease(ctx, r.version, ttl, snapshotHolder(holder))
	if err != nil {
		return nil, fmt.Errorf("rollout: snapshot of store %s: lease version %d: %w", s.name, r.version, err)
	}
	tag := SnapshotTagPrefix + l.ID
	if _, err := table.CreateTag(ctx, s.root, tag, r.version); err != nil {
		_ = s.ReleaseLease(context.WithoutCancel(ctx), l.ID)
		return nil, fmt.Errorf("rollout: snapshot of store %s: tag version %d: %w", s.name, r.version, s.tagErr(tag, err))
	}
	return &SnapshotInfo{ID: l.ID, Version: r.version, Tag: tag, ExpiresAt: l.ExpiresAt, Holder: holder, ExcludedShards: r.excluded}, nil
}

func snapshotHolder(holder string) string {
	if holder == "" {
		return snapshotHolderPrefix
	}
	return snapshotHolderPrefix + ":" + holder
}

// snapshotLease reports whether l is a snapshot's, and its holder.
func snapshotLease(l *Lease) (holder string, ok bool) {
	if l.Holder == snapshotHolderPrefix {
		return "", true
	}
	h, ok := strings.CutPrefix(l.Holder, snapshotHolderPrefix+":")
	return h, ok
}

// joinRound returns the round the caller waits for: a new one started now
// when none runs, else the one after the running round.
func (s *Store) joinRound(peers SnapshotPeers) *snapRound {
	rs := s.snapRounds()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.next == nil {
		rs.next = &snapRound{done: make(chan struct{})}
	}
	r := rs.next
	if r.peers == nil {
		r.peers = peers
	}
	if !rs.running {
		rs.running, rs.next = true, nil
		go s.runRounds(rs, r)
	}
	return r
}

// runRounds runs r, then the round callers joined meanwhile, until none
// waits.
func (s *Store) runRounds(rs *snapRounds, r *snapRound) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), snapshotRoundTimeout)
		r.version, r.excluded, r.err = s.snapshotRound(ctx, r.peers)
		cancel()
		rs.mu.Lock()
		rs.rounds++
		close(r.done)
		r = rs.next
		if r == nil {
			rs.running = false
			rs.mu.Unlock()
			return
		}
		rs.next = nil
		rs.mu.Unlock()
	}
}

// afterSnapshotSeal, when set (tests), runs in a round after its seal.
var afterSnapshotSeal func(*Store)

// snapshotRound seals this process's memtable, merges its shard up to that
// seal, merges the shards nobody owns, has peers (when not nil) seal and
// merge the shards other live processes own, and returns the latest base
// version with the live shards of other processes it does not cover.
func (s *Store) snapshotRound(ctx context.Context, peers SnapshotPeers) (uint64, []api.SnapshotShard, error) {
	if err := s.Flush(ctx); err != nil {
		return 0, nil, fmt.Errorf("rollout: snapshot of store %s: seal: %w", s.name, err)
	}
	if afterSnapshotSeal != nil {
		afterSnapshotSeal(s)
	}
	if err := s.mergeOwnUpToSeal(ctx); err != nil {
		return 0, nil, fmt.Errorf("rollout: snapshot of store %s: merge: %w", s.name, err)
	}
	live, err := s.mergeOthers(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("rollout: snapshot of store %s: %w", s.name, err)
	}
	var excluded []api.SnapshotShard
	if peers == nil {
		for _, x := range live {
			if x.PendingGenerations > 0 {
				excluded = append(excluded, x)
			}
		}
	} else {
		excluded = s.sealPeers(ctx, peers, live)
	}
	latest, err := table.Open(ctx, s.root)
	if err != nil {
		return 0, nil, err
	}
	s.sawVersion(latest.Version())
	return latest.Version(), excluded, nil
}

// mergeOwnUpToSeal merges this process's shard until its watermark reaches
// the newest generation sealed now: generations sealed later (appends that
// came after the call) may ride along in a pass, but are not waited for.
func (s *Store) mergeOwnUpToSeal(ctx context.Context) error {
	w := s.writer.Load()
	if w == nil {
		return nil // never claimed and no manifest: nothing of ours pending
	}
	gens := w.Manifest().Generations
	if len(gens) == 0 {
		return nil
	}
	target := gens[len(gens)-1].Generation
	for pass := 0; pass < 10000; pass++ {
		w, err := s.walWriter(ctx)
		if err != nil {
			return err
		}
		res, err := s.mergeWith(ctx, w)
		if err != nil {
			s.forgetDead(w, err)
			return s.noteSpace(err)
		}
		if res.Watermark >= target || (res.Generations == 0 && res.Remaining == 0) {
			return nil
		}
	}
	return fmt.Errorf("rollout: shard %s still below generation %d after 10000 merge passes", s.shard, target)
}

// mergeOthers merges every shard of the store that no live process owns
// and has something to merge, and lists the live shards of other
// processes, with what they held pending.
func (s *Store) mergeOthers(ctx context.Context) ([]api.SnapshotShard, error) {
	shards, err := wal.ListShards(ctx, s.root)
	if err != nil {
		return nil, err
	}
	base, err := table.Open(ctx, s.root)
	if err != nil {
		return nil, err
	}
	var excluded []api.SnapshotShard
	for _, sh := range shards {
		if sh == s.shard {
			continue
		}
		h, err := wal.ReadHolder(ctx, s.root, sh)
		if errors.Is(err, wal.ErrNoShard) {
			continue
		}
		if err != nil {
			return nil, err
		}
		man, err := wal.LoadManifest(ctx, s.root, sh)
		if errors.Is(err, wal.ErrNoShard) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pending := man.Pending(Watermark(base, sh))
		if s.holderLive(h) {
			x := api.SnapshotShard{ShardID: sh, PendingGenerations: len(pending)}
			if h.Owner != nil {
				x.InstanceID = h.Owner.Instance
			}
			for _, g := range pending {
				x.PendingRows += g.Rows
			}
			excluded = append(excluded, x)
			continue
		}
		// Gone: a crashed owner may have left acknowledged rows in its log
		// alone (an owner that closed the shard, or an orphan merge, sealed
		// everything); the orphan merge's claim replays and seals them.
		unsealed := h.Owner != nil && !h.Owner.Merge && (h.Heartbeat == nil || !h.Heartbeat.Released)
		if len(pending) == 0 && !unsealed {
			continue
		}
		for pass := 0; pass < 10000; pass++ {
			res, err := s.MergeShard(ctx, sh)
			if err != nil {
				return nil, fmt.Errorf("merge of orphan shard %s: %w", sh, err)
			}
			if res.Remaining == 0 {
				break
			}
		}
	}
	return excluded, nil
}

// holderLive reports whether another process holds the shard and showed a
// sign of life within its TTL (by this process's clock: a skew of more
// than the TTL misjudges it, which costs a claim the owner takes back, or
// a shard listed as excluded).
func (s *Store) holderLive(h *wal.Holder) bool {
	if !h.Contends(s.opts.OwnerID) {
		return false
	}
	return s.opts.Clock.Now().Sub(h.LastSign()) < h.TTL(s.opts.HeartbeatTTL)
}

// Snapshot returns a live snapshot.
func (s *Store) Snapshot(ctx context.Context, id string) (*SnapshotInfo, error) {
	l, err := s.Lease(ctx, id)
	if err != nil {
		return nil, err
	}
	holder, ok := snapshotLease(l)
	if !ok {
		return nil, fmt.Errorf("%w: lease %s of store %s is not a snapshot's", ErrNotFound, id, s.name)
	}
	return &SnapshotInfo{ID: l.ID, Version: l.Version, Tag: SnapshotTagPrefix + l.ID, ExpiresAt: l.ExpiresAt, Holder: holder}, nil
}

// Snapshots lists the live snapshots, oldest version first.
func (s *Store) Snapshots(ctx context.Context) ([]SnapshotInfo, error) {
	ls, err := s.Leases(ctx)
	if err != nil {
		return nil, err
	}
	out := []SnapshotInfo{}
	for i := range ls {
		if holder, ok := snapshotLease(&ls[i]); ok {
			out = append(out, SnapshotInfo{ID: ls[i].ID, Version: ls[i].Version, Tag: SnapshotTagPrefix + ls[i].ID, ExpiresAt: ls[i].ExpiresAt, Holder: holder})
		}
	}
	return out, nil
}

// RenewSnapshot extends a live snapshot's lease to ttl from now.
func (s *Store) RenewSnapshot(ctx context.Context, id string, ttl time.Duration) (*SnapshotInfo, error) {
	if _, err := s.Snapshot(ctx, id); err != nil {
		return nil, err
	}
	l, err := s.RenewLease(ctx, id, ttl)
	if err != nil {
		return nil, err
	}
	holder, _ := snapshotLease(l)
	return &SnapshotInfo{ID: l.ID, Version: l.Version, Tag: SnapshotTagPrefix + l.ID, ExpiresAt: l.ExpiresAt, Holder: holder}, nil
}

// ReleaseSnapshot deletes a snapshot's tag, then releases its lease: its
// version is then subject to cleanup again.
func (s *Store) ReleaseSnapshot(ctx context.Context, id string) error {
	if _, err := s.Snapshot(ctx, id); err != nil {
		return err
	}
	if err := table.DeleteTag(ctx, s.root, SnapshotTagPrefix+id); err != nil && !errors.Is(err, table.ErrTagNotFound) {
		return fmt.Errorf("rollout: release snapshot %s of store %s: %w", id, s.name, err)
	}
	return s.ReleaseLease(ctx, id)
}

// ExpireSnapshotTags deletes the tags of snapshots whose lease has expired
// or was released (SnapshotTagPrefix is reserved for them), so that the
// cleanup after it may remove their versions. It returns how many it
// deleted.
func (s *Store) ExpireSnapshotTags(ctx context.Context) (int, error) {
	tags, err := table.ListTags(ctx, s.root)
	if err != nil {
		return 0, fmt.Errorf("rollout: snapshot tags of store %s: %w", s.name, err)
	}
	n := 0
	for _, t := range tags {
		id, ok := strings.CutPrefix(t.Name, SnapshotTagPrefix)
		if !ok {
			continue
		}
		_, err := s.Lease(ctx, id)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			// Unreadable (a damaged file, a failed read): keep the tag;
			// the next cleanup looks again.
			s.opts.Logger.Warn("rollout: reading a snapshot's lease", "store", s.name, "snapshot", id, "err", err)
			continue
		}
		if err := table.DeleteTag(ctx, s.root, t.Name); err != nil && !errors.Is(err, table.ErrTagNotFound) {
			return n, fmt.Errorf("rollout: delete the tag of expired snapshot %s of store %s: %w", id, s.name, err)
		}
		n++
	}
	return n, nil
}

// SnapshotPeers reaches the processes that own the store's other live
// shards, so that a snapshot holds what they acknowledged before it too.
// The worker implements it over HTTP with the endpoints workers register
// in etcd (worker/snapshots.go); tests call other Store handles.
type SnapshotPeers interface {
	// Seal asks the owner of shard.ShardID to seal its memtable of store:
	// everything it acknowledged before the call is then in a generation
	// of its shard manifest when Seal returns nil.
	Seal(ctx context.Context, store string, shard api.SnapshotShard) error
	// Merge asks the owner for one merge pass of its shard.
	Merge(ctx context.Context, store string, shard api.SnapshotShard) error
}

// snapshotPeerTimeout bounds the sealing and merging of one peer's shard:
// a peer that hangs is listed as excluded, it does not hold the round.
const snapshotPeerTimeout = 2 * time.Minute

// sealPeers has every live shard of live (other processes') sealed and
// merged up to that seal by its owner, in parallel, and returns the shards
// it could not cover, each with the reason.
func (s *Store) sealPeers(ctx context.Context, peers SnapshotPeers, live []api.SnapshotShard) []api.SnapshotShard {
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, snapshotPeerTimeout)
			defer cancel()
			errs[i] = s.sealPeer(pctx, peers, live[i])
		}()
	}
	wg.Wait()
	var excluded []api.SnapshotShard
	for i, err := range errs {
		if err == nil {
			continue
		}
		s.opts.Logger.Warn("rollout: snapshot could not have another worker's shard sealed and merged; it is listed as excluded",
			"store", s.name, "shard", live[i].ShardID, "instance", live[i].InstanceID, "err", err)
		x := live[i]
		x.Reason = err.Error()
		excluded = append(excluded, x)
	}
	return excluded
}

// sealPeer has the owner of x seal, then merge until the base's watermark
// of x reaches the newest generation of x's manifest after the seal (the
// seal's, or a later one: generations sealed after it may ride along).
func (s *Store) sealPeer(ctx context.Context, peers SnapshotPeers, x api.SnapshotShard) error {
	if err := peers.Seal(ctx, s.name, x); err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	man, err := wal.LoadManifest(ctx, s.root, x.ShardID)
	if err != nil {
		return fmt.Errorf("read its manifest after the seal: %w", err)
	}
	var target uint64
	for _, g := range man.Generations {
		target = max(target, g.Generation)
	}
	last, stuck := uint64(0), 0
	for pass := 0; ; pass++ {
		base, err := table.Open(ctx, s.root)
		if err != nil {
			return err
		}
		wm := Watermark(base, x.ShardID)
		if wm >= target {
			return nil
		}
		// Two passes in a row that moved nothing: the owner is not merging
		// this shard (it lost it, or it refuses), so waiting cannot help.
		if pass > 0 && wm == last {
			if stuck++; stuck >= 2 {
				return fmt.Errorf("merged up to generation %d, short of %d, and its owner's merges make no progress", wm, target)
			}
		} else {
			stuck = 0
		}
		last = wm
		if err := peers.Merge(ctx, s.name, x); err != nil {
			return fmt.Errorf("merge (up to generation %d, at %d): %w", target, wm, err)
		}
	}
}
