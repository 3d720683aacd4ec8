package wal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// Root is the directory of the WAL tier inside a dataset.
const Root = "_lc_wal/"

var (
	// ErrFenced means another writer claimed the shard; this writer can
	// neither append nor acknowledge.
	ErrFenced = errors.New("wal: shard writer fenced by a newer epoch")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("wal: shard writer closed")
	// ErrNoShard is returned when a shard has no manifest.
	ErrNoShard = errors.New("wal: no such shard")
)

// Generation is one sealed, immutable generation file of a shard.
type Generation struct {
	Generation uint64    `json:"generation"`
	Path       string    `json:"path"` // relative to the shard directory
	Rows       int64     `json:"rows"`
	Bytes      int64     `json:"bytes"`
	MinID      string    `json:"min_id"`
	MaxID      string    `json:"max_id"`
	SealedAt   time.Time `json:"sealed_at"`
}

// Manifest is one version of a shard manifest.
type Manifest struct {
	Version        uint64 `json:"version"`
	Epoch          uint64 `json:"epoch"`
	NextGeneration uint64 `json:"next_generation"`
	ReplayAfter    uint64 `json:"replay_after"`
	// LogEpoch: segment files of lower epochs are dead (see doc.go).
	LogEpoch    uint64       `json:"log_epoch,omitempty"`
	Generations []Generation `json:"generations"`
	// Claims are the versions that claimed the shard (a new epoch), and
	// Fences the WAL positions of the claims' fence entries: both are
	// kept forever, since a writer deposed by that claim may wake at any
	// time (see doc.go, "Fencing").
	Claims []uint64 `json:"claims,omitempty"`
	Fences []uint64 `json:"fences,omitempty"`
	// Owner is the process whose claim made this epoch (nil: a writer
	// that records none); see doc.go, "Owners and heartbeats".
	Owner     *Owner    `json:"owner,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (m *Manifest) clone() *Manifest {
	c := *m
	c.Generations = append([]Generation(nil), m.Generations...)
	c.Claims = append([]uint64(nil), m.Claims...)
	c.Fences = append([]uint64(nil), m.Fences...)
	if m.Owner != nil {
		o := *m.Owner
		c.Owner = &o
	}
	return &c
}

// Pending returns the generations above watermark, oldest first.
func (m *Manifest) Pending(watermark uint64) []Generation {
	var out []Generation
	for _, g := range m.Generations {
		if g.Generation > watermark {
			out = append(out, g)
		}
	}
	return out
}

func shardDir(shard string) string { return Root + shard + "/" }

func manifestKey(shard string, v uint64) string {
	return fmt.Sprintf("%smanifest/%016x.json", shardDir(shard), bits.Reverse64(v))
}

func hintKey(shard string) string { return shardDir(shard) + "manifest/hint.json" }

func parseManifestKey(key string) (uint64, bool) {
	base, ok := strings.CutSuffix(path.Base(key), ".json")
	if !ok || len(base) != 16 {
		return 0, false
	}
	u, err := strconv.ParseUint(base, 16, 64)
	if err != nil {
		return 0, false
	}
	return bits.Reverse64(u), true
}

// shardsDir holds one empty marker object per shard, written at claim, so
// shards are listed without listing their logs.
const shardsDir = Root + "_shards/"

// ListShards returns the ids of every shard ever claimed, in order.
func ListShards(ctx context.Context, store objstore.Reader) ([]string, error) {
	// Names only: on local disk a listing of names is reused while the
	// directory is unchanged, where List stats every entry.
	keys, _, err := objstore.ListKeys(ctx, store, shardsDir)
	if err != nil {
		return nil, fmt.Errorf("wal: list shards: %w", err)
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, strings.TrimPrefix(k, shardsDir))
	}
	return out, nil
}

// LoadManifest returns the latest manifest of a shard, or ErrNoShard.
func LoadManifest(ctx context.Context, store objstore.Reader, shard string) (*Manifest, error) {
	v, err := latestVersion(ctx, store, shard)
	if err != nil {
		return nil, err
	}
	return readManifest(ctx, store, shard, v)
}

func readManifest(ctx context.Context, store objstore.Reader, shard string, v uint64) (*Manifest, error) {
	b, err := store.Get(ctx, manifestKey(shard, v))
	if err != nil {
		return nil, fmt.Errorf("wal: read shard %s manifest %d: %w", shard, v, err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("wal: decode shard %s manifest %d: %w", shard, v, err)
	}
	if m.Version != v {
		return nil, fmt.Errorf("wal: shard %s manifest %d claims version %d", shard, v, m.Version)
	}
	return m, nil
}

// loadListedManifest returns the latest manifest found by listing, which is
// what a claim must build on: probing from a hint stops at the first
// absent version, and after a crash a deleted old version may come back
// below a gap (deletes are not flushed). A claim that wrote the version
// after such a stale one would fork the chain.
//
// The newest version listed is read beside the probe past it: where no
// commit raced the listing (nearly always) that read is the answer.
func loadListedManifest(ctx context.Context, store objstore.Reader, shard string) (*Manifest, error) {
	best, err := listedBest(ctx, store, shard)
	if err != nil {
		return nil, err
	}
	var (
		m          *Manifest
		v          uint64
		merr, perr error
		wg         sync.WaitGroup
	)
	wg.Go(func() { m, merr = readManifest(ctx, store, shard, best) })
	wg.Go(func() { v, perr = probeUp(ctx, store, shard, best) })
	wg.Wait()
	switch {
	case perr != nil:
		return nil, perr
	case v != best:
		return readManifest(ctx, store, shard, v)
	}
	return m, merr
}

// latestVersion finds the newest manifest version: from the hint, probing
// upward, else by listing. Returns ErrNoShard when there is none. Writers
// delete only versions below the hint they last wrote, so every version
// from the hint up exists.
func latestVersion(ctx context.Context, store objstore.Reader, shard string) (uint64, error) {
	if b, err := store.Get(ctx, hintKey(shard)); err == nil {
		var h struct{ Version uint64 }
		if json.Unmarshal(b, &h) == nil && h.Version > 0 {
			if _, err := store.Head(ctx, manifestKey(shard, h.Version)); err == nil {
				return probeUp(ctx, store, shard, h.Version)
			}
		}
	}
	return listedVersion(ctx, store, shard)
}

// listedVersion finds the newest manifest version by listing.
func listedVersion(ctx context.Context, store objstore.Reader, shard string) (uint64, error) {
	best, err := listedBest(ctx, store, shard)
	if err != nil {
		return 0, err
	}
	// A listing can race with a commit; probing makes the answer current.
	return probeUp(ctx, store, shard, best)
}

// listedBest returns the newest manifest version a listing shows.
func listedBest(ctx context.Context, store objstore.Reader, shard string) (uint64, error) {
	objs, err := store.List(ctx, shardDir(shard)+"manifest/")
	if err != nil {
		return 0, fmt.Errorf("wal: list shard %s manifests: %w", shard, err)
	}
	var best uint64
	for _, o := range objs {
		if v, ok := parseManifestKey(o.Key); ok && v > best {
			best = v
		}
	}
	if best == 0 {
		return 0, ErrNoShard
	}
	return best, nil
}

func probeUp(ctx context.Context, store objstore.Reader, shard string, v uint64) (uint64, error) {
	for {
		_, err := store.Head(ctx, manifestKey(shard, v+1))
		if errors.Is(err, objstore.ErrNotFound) {
			return v, nil
		}
		if err != nil {
			return 0, fmt.Errorf("wal: probe shard %s manifest %d: %w", shard, v+1, err)
		}
		v++
	}
}

// commitManifest writes m (whose Version is the next one) put-if-absent,
// retrying transient errors. It returns ErrFenced when another writer holds
// that version. A retry that finds the name taken compares bytes, so our own
// earlier write whose acknowledgement was lost counts as success.
func commitManifest(ctx context.Context, store objstore.Store, shard string, m *Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("wal: encode manifest: %w", err)
	}
	key := manifestKey(shard, m.Version)
	err = retry(ctx, func() error { return store.PutIfAbsent(ctx, key, b) })
	if errors.Is(err, objstore.ErrExists) {
		got, gerr := store.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("wal: read back shard %s manifest %d: %w", shard, m.Version, gerr)
		}
		if !bytes.Equal(got, b) {
			return fmt.Errorf("%w: shard %s manifest version %d was written by another writer", ErrFenced, shard, m.Version)
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("wal: commit shard %s manifest %d: %w", shard, m.Version, err)
	}
	return nil
}

// writeHint records version as the shard's latest manifest version. The
// hint only shortens LoadManifest's search (which probes upward from it),
// so a failed or late hint costs nothing but a few probes.
func writeHint(ctx context.Context, store objstore.Store, shard string, version uint64) error {
	return store.Put(ctx, hintKey(shard), []byte(fmt.Sprintf(`{"version":%d}`, version)))
}

// retry runs op until it succeeds, fails with ErrExists or ErrNotFound, or
// has failed retryAttempts times; it waits between attempts.
func retry(ctx context.Context, op func() error) error {
	var err error
	for attempt := 0; attempt < retryAttempts; attempt++ {
		if err = op(); err == nil || errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrNotFound) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}

const retryAttempts = 4

// LatestManifestInfo finds a shard's newest manifest version with one
// listing of its manifest directory (versions below the hint are deleted,
// so it holds a few dozen names at most) and returns it with its listing
// entry, so that a reader that cached that version can skip reading it.
// On local disk the listing reads names only and the newest is looked up
// alone (objstore.ListKeys): a stat per manifest was most of a warm point
// read's cost there. Returns ErrNoShard when the shard has no manifest.
func LatestManifestInfo(ctx context.Context, store objstore.Reader, shard string) (uint64, objstore.ObjectInfo, error) {
	keys, infos, err := objstore.ListKeys(ctx, store, shardDir(shard)+"manifest/")
	if err != nil {
		return 0, objstore.ObjectInfo{}, fmt.Errorf("wal: list shard %s manifests: %w", shard, err)
	}
	best, at := newestManifest(keys)
	if best == 0 {
		return 0, objstore.ObjectInfo{}, ErrNoShard
	}
	if infos != nil {
		return best, infos[at], nil
	}
	info, err := store.Head(ctx, keys[at])
	if errors.Is(err, objstore.ErrNotFound) {
		// The shard was deleted since the listing; a listing with the
		// metadata answers what is there now.
		return latestManifestListed(ctx, store, shard)
	}
	if err != nil {
		return 0, objstore.ObjectInfo{}, fmt.Errorf("wal: shard %s manifest %d: %w", shard, best, err)
	}
	return best, info, nil
}

// latestManifestListed is LatestManifestInfo through List.
func latestManifestListed(ctx context.Context, store objstore.Reader, shard string) (uint64, objstore.ObjectInfo, error) {
	objs, err := store.List(ctx, shardDir(shard)+"manifest/")
	if err != nil {
		return 0, objstore.ObjectInfo{}, fmt.Errorf("wal: list shard %s manifests: %w", shard, err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	best, at := newestManifest(keys)
	if best == 0 {
		return 0, objstore.ObjectInfo{}, ErrNoShard
	}
	return best, objs[at], nil
}

// newestManifest returns the highest manifest version among keys and its
// index (0 and -1 when none is a manifest).
func newestManifest(keys []string) (best uint64, at int) {
	at = -1
	for i, k := range keys {
		if v, ok := parseManifestKey(k); ok && v > best {
			best, at = v, i
		}
	}
	return best, at
}

// ReadManifest reads version v of a shard's manifest.
func ReadManifest(ctx context.Context, store objstore.Reader, shard string, v uint64) (*Manifest, error) {
	return readManifest(ctx, store, shard, v)
}
