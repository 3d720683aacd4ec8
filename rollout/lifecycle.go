package rollout

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// Retention defaults (see CleanupOptions).
const (
	// DefaultCleanupOlderThan is how long a superseded version stays
	// readable by version number (time travel) before cleanup removes it.
	DefaultCleanupOlderThan = 2 * time.Hour
	// DefaultReadGrace covers reads that opened a version while it was the
	// latest and run on after a newer one lands: longer than any request
	// (HTTP write timeout 120 s; SQL queries are bounded shorter).
	DefaultReadGrace = 3 * time.Minute
	// PinLeaseTTL is the life of a checkout pin's lease; the maintainer
	// renews it at half-life, so a pin outlives its process by at most this.
	PinLeaseTTL = 10 * time.Minute
)

// ErrConflict is returned when a concurrent change made an operation
// impossible (a tag created on a version a cleanup was removing); retry.
var ErrConflict = table.ErrConflict

// leasesDir holds one JSON object per lease beside the table (Lance readers
// ignore directories they do not know).
const leasesDir = "_lc_leases/"

// Lease keeps one base version from cleanup until it expires or is
// released: a checkout pin, a snapshot, a long read of another process.
// Its file is the wire type's JSON.
type Lease = api.Lease

func leaseLive(l *Lease, now time.Time) bool { return now.Before(l.ExpiresAt) }

func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validLeaseID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Store) clockNow() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// TakeLease keeps base version (0: the latest) until ttl from now.
func (s *Store) TakeLease(ctx context.Context, version uint64, ttl time.Duration, holder string) (*Lease, error) {
	if ttl <= 0 {
		return nil, invalid("a lease needs a positive time to live, got %v", ttl)
	}
	if version == 0 {
		latest, err := table.Open(ctx, s.root)
		if err != nil {
			return nil, err
		}
		version = latest.Version()
	} else if err := s.versionExists(ctx, version); err != nil {
		return nil, err
	}
	l := &Lease{ID: newLeaseID(), Version: version, ExpiresAt: s.clockNow().Add(ttl).UTC(), Holder: holder}
	if err := s.putLease(ctx, l, true); err != nil {
		return nil, err
	}
	// A cleanup that read the leases before this one may be removing the
	// version now (it checks again before deleting; this closes the rest).
	if err := s.versionExists(ctx, version); err != nil {
		_ = s.root.Delete(context.WithoutCancel(ctx), leasesDir+l.ID+".json")
		return nil, err
	}
	return l, nil
}

func (s *Store) versionExists(ctx context.Context, v uint64) error {
	if _, err := table.Checkout(ctx, s.root, v); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("%w: version %d of store %s (cleaned up, or never committed)", ErrNotFound, v, s.name)
		}
		return err
	}
	return nil
}

func (s *Store) putLease(ctx context.Context, l *Lease, create bool) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	key := leasesDir + l.ID + ".json"
	if create {
		err = s.root.PutIfAbsent(ctx, key, b)
	} else {
		err = s.root.Put(ctx, key, b)
	}
	if err != nil {
		return fmt.Errorf("rollout: lease %s of store %s: %w", l.ID, s.name, err)
	}
	return nil
}

// Lease returns one live lease.
func (s *Store) Lease(ctx context.Context, id string) (*Lease, error) {
	if !validLeaseID(id) {
		return nil, fmt.Errorf("%w: lease %q", ErrNotFound, id)
	}
	b, err := s.root.Get(ctx, leasesDir+id+".json")
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: lease %s of store %s", ErrNotFound, id, s.name)
	}
	if err != nil {
		return nil, err
	}
	var l Lease
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("rollout: lease %s of store %s is damaged: %w", id, s.name, err)
	}
	if !leaseLive(&l, s.clockNow()) {
		return nil, fmt.Errorf("%w: lease %s of store %s expired at %s", ErrNotFound, id, s.name, l.ExpiresAt.Format(time.RFC3339))
	}
	return &l, nil
}

// RenewLease extends a live lease to ttl from now. An expired lease cannot
// be renewed: cleanup may already have removed its version.
func (s *Store) RenewLease(ctx context.Context, id string, ttl time.Duration) (*Lease, error) {
	if ttl <= 0 {
		return nil, invalid("a lease needs a positive time to live, got %v", ttl)
	}
	l, err := s.Lease(ctx, id)
	if err != nil {
		return nil, err
	}
	l.ExpiresAt = s.clockNow().Add(ttl).UTC()
	return l, s.putLease(ctx, l, false)
}

// ReleaseLease ends a lease; its version is subject to cleanup again.
func (s *Store) ReleaseLease(ctx context.Context, id string) error {
	if _, err := s.Lease(ctx, id); err != nil {
		return err
	}
	return s.root.Delete(ctx, leasesDir+id+".json")
}

// Leases returns the live leases, oldest version first. Expired ones are
// skipped (cleanup deletes their files).
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	live, _, err := s.readLeases(ctx)
	return live, err
}

func (s *Store) readLeases(ctx context.Context) (live []Lease, expired []string, err error) {
	infos, err := s.root.List(ctx, leasesDir)
	if err != nil {
		return nil, nil, fmt.Errorf("rollout: list leases of store %s: %w", s.name, err)
	}
	now := s.clockNow()
	for _, o := range infos {
		b, err := s.root.Get(ctx, o.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		var l Lease
		if err := json.Unmarshal(b, &l); err != nil {
			// Unreadable: keep nothing for it, and never delete it silently.
			s.opts.Logger.Warn("rollout: damaged lease file", "store", s.name, "key", o.Key, "err", err)
			continue
		}
		if leaseLive(&l, now) {
			live = append(live, l)
		} else {
			expired = append(expired, o.Key)
		}
	}
	slices.SortFunc(live, func(a, b Lease) int { return cmp.Compare(a.Version, b.Version) })
	return live, expired, nil
}

// hold keeps every version from floor up out of cleanups of this process
// while a long operation (a compaction, an index build) reads them; the
// read grace covers other processes' short reads. It returns the release.
func (s *Store) hold(floor uint64) func() {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.holds == nil {
		s.holds = map[uint64]int{}
	}
	s.holds[floor]++
	return func() {
		s.hmu.Lock()
		defer s.hmu.Unlock()
		if s.holds[floor]--; s.holds[floor] == 0 {
			delete(s.holds, floor)
		}
	}
}

func (s *Store) heldFloor() (uint64, bool) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	var min uint64
	found := false
	for f := range s.holds {
		if !found || f < min {
			min, found = f, true
		}
	}
	return min, found
}

// CleanupOptions says what a cleanup keeps beyond the latest version,
// tags, leases, this process's pin and its running operations.
type CleanupOptions struct {
	// OlderThan: versions committed less than this long ago are kept.
	// Zero keeps none for age.
	OlderThan time.Duration
	// ReadGrace keeps versions superseded less than this long ago (reads
	// that opened them may still run); nil means DefaultReadGrace.
	ReadGrace *time.Duration
	// DeleteUnverified removes files no manifest references however young
	// (Lance's delete_unverified): only when nothing else writes the store.
	DeleteUnverified bool
	// BlobGrace: payload objects younger than this are never deleted
	// (an upload's append may not be in the log yet); nil means
	// DefaultBlobGrace.
	BlobGrace *time.Duration
}

// CleanupResult is a cleanup's report.
type CleanupResult struct {
	table.CleanupResult
	LeasesExpired int      `json:"leases_expired"`
	RowsExpired   int64    `json:"rows_expired"`  // by the row retention, when the maintainer ran it first
	HeldVersions  []uint64 `json:"held_versions"` // by leases, pins and running operations
	TaggedVersion []uint64 `json:"tagged_versions"`
	// Payload objects (out-of-line payloads) no row refers to any more;
	// they are counted in files_removed and bytes_removed too.
	BlobsRemoved     int   `json:"blobs_removed"`
	BlobBytesRemoved int64 `json:"blob_bytes_removed"`
}

// Cleanup removes old base versions and the files only they reference
// (table.Cleanup), keeping the latest, tagged and leased versions, this
// process's checkout pin and what its running operations read; then it
// deletes expired leases.
func (s *Store) Cleanup(ctx context.Context, o CleanupOptions) (*CleanupResult, error) {
	s.cleanMu.Lock()
	defer s.cleanMu.Unlock()
	grace := DefaultReadGrace
	if o.ReadGrace != nil {
		grace = *o.ReadGrace
	}
	leases, expired, err := s.readLeases(ctx)
	if err != nil {
		return nil, err
	}
	held := map[uint64]bool{}
	for _, l := range leases {
		held[l.Version] = true
	}
	if v := s.pinned.Load(); v != 0 {
		held[v] = true
	}
	now := s.clockNow()
	opts := table.CleanupOptions{
		ReadGrace:        grace,
		DeleteUnverified: o.DeleteUnverified,
		Now:              s.clockNow,
		Keep: func(v uint64) bool {
			if held[v] {
				return true
			}
			floor, ok := s.heldFloor()
			return ok && v >= floor
		},
		// Leases taken since they were read must hold too.
		Recheck: func(ctx context.Context, removing []uint64) error {
			again, _, err := s.readLeases(ctx)
			if err != nil {
				return err
			}
			for _, l := range again {
				if slices.Contains(removing, l.Version) {
					return fmt.Errorf("%w: lease %s of version %d was taken during the cleanup: run it again", ErrConflict, l.ID, l.Version)
				}
			}
			return nil
		},
	}
	if o.OlderThan > 0 {
		opts.Before = now.Add(-o.OlderThan)
	}
	var kept []*table.Dataset
	opts.Kept = func(ds []*table.Dataset) { kept = ds }
	res, err := table.Cleanup(ctx, s.root, opts)
	if err != nil {
		return nil, fmt.Errorf("rollout: cleanup of store %s: %w", s.name, err)
	}
	out := &CleanupResult{CleanupResult: *res, HeldVersions: []uint64{}, TaggedVersion: []uint64{}}
	blobGrace := DefaultBlobGrace
	if o.BlobGrace != nil {
		blobGrace = *o.BlobGrace
	}
	if out.BlobsRemoved, out.BlobBytesRemoved, err = s.collectBlobs(ctx, blobGrace, kept); err != nil {
		return out, fmt.Errorf("rollout: cleanup of store %s: %w", s.name, err)
	}
	out.FilesRemoved += out.BlobsRemoved
	out.BytesRemoved += out.BlobBytesRemoved
	err = objstore.DeleteKeys(ctx, s.root, expired)
	out.LeasesExpired = len(expired) - len(objstore.NotDeleted(err, expired))
	if err != nil {
		return out, err
	}
	for v := range held {
		out.HeldVersions = append(out.HeldVersions, v)
	}
	slices.Sort(out.HeldVersions)
	tags, err := table.ListTags(ctx, s.root)
	if err == nil {
		for _, t := range tags {
			if !slices.Contains(out.TaggedVersion, t.Version) {
				out.TaggedVersion = append(out.TaggedVersion, t.Version)
			}
		}
		slices.Sort(out.TaggedVersion)
	}
	s.opts.metrics.ops.cleaned(res)
	return out, nil
}

// CreateTag names base version (0: the latest) in Lance's tag format.
func (s *Store) CreateTag(ctx context.Context, name string, version uint64) (*table.Tag, error) {
	if version == 0 {
		latest, err := table.Open(ctx, s.root)
		if err != nil {
			return nil, err
		}
		version = latest.Version()
	}
	t, err := table.CreateTag(ctx, s.root, name, version)
	return t, s.tagErr(name, err)
}

// Tag returns one tag.
func (s *Store) Tag(ctx context.Context, name string) (*table.Tag, error) {
	t, err := table.GetTag(ctx, s.root, name)
	return t, s.tagErr(name, err)
}

// Tags lists the store's tags.
func (s *Store) Tags(ctx context.Context) ([]table.Tag, error) {
	tags, err := table.ListTags(ctx, s.root)
	if tags == nil && err == nil {
		tags = []table.Tag{}
	}
	return tags, err
}

// DeleteTag removes a tag.
func (s *Store) DeleteTag(ctx context.Context, name string) error {
	return s.tagErr(name, table.DeleteTag(ctx, s.root, name))
}

// tagErr maps table's tag errors to this package's.
func (s *Store) tagErr(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, table.ErrInvalidTag):
		// table's message names the tag already.
		return invalid("%s", strings.TrimPrefix(err.Error(), "lance/table: "))
	case errors.Is(err, table.ErrTagExists):
		return fmt.Errorf("%w: tag %s of store %s (delete it first to move it)", ErrExists, name, s.name)
	case errors.Is(err, table.ErrTagNotFound), errors.Is(err, table.ErrVersionNotFound):
		return fmt.Errorf("%w: %v (store %s)", ErrNotFound, err, s.name)
	}
	return err
}
