package table

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

// UnverifiedAge is how old a file that no manifest references must be
// before cleanup removes it: younger, it may belong to a commit in flight
// (Lance's UNVERIFIED_THRESHOLD_DAYS).
const UnverifiedAge = 7 * 24 * time.Hour

// CleanupOptions says which versions a cleanup may remove.
type CleanupOptions struct {
	// Before: a version whose manifest was committed at or after it is
	// kept. The zero time keeps none for age.
	Before time.Time
	// Keep reports versions a reader holds (pins, leases); they are kept.
	Keep func(version uint64) bool
	// ReadGrace keeps a version superseded less than this long ago: a read
	// that opened it while it was the latest may still be running (reads
	// are bounded by request timeouts; they take no lease).
	ReadGrace time.Duration
	// DeleteUnverified removes files no manifest references however young
	// they are (Lance's delete_unverified): only safe when nothing commits
	// meanwhile. Without it they must be older than UnverifiedAge.
	DeleteUnverified bool
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Recheck, when set, runs just before anything is deleted with the
	// versions about to go: a holder taken since Keep was asked (a lease)
	// fails the cleanup with its error.
	Recheck func(ctx context.Context, removing []uint64) error
	// Hook, when set, runs before each deletion step ("files", "manifests")
	// with the keys about to go; an error stops the cleanup there (crash
	// tests).
	Hook func(step string, keys []string) error
	// Kept, when set, receives the versions a successful cleanup kept,
	// from the manifests it read, oldest first: a caller that reads them
	// next (rollout's payload collection) reads no manifest again.
	Kept func(kept []*Dataset)
}

// CleanupResult is what a cleanup removed and kept.
type CleanupResult struct {
	VersionsRemoved int    `json:"versions_removed"`
	FilesRemoved    int    `json:"files_removed"` // manifests included
	BytesRemoved    int64  `json:"bytes_removed"`
	VersionsKept    int    `json:"versions_kept"`
	Latest          uint64 `json:"latest_version"`
	OldestKept      uint64 `json:"oldest_kept_version"`
}

// referenced is the set of files some set of manifests points at.
type referenced struct {
	files   map[string]bool // data, deletion and transaction files
	indexes map[string]bool // _indices/ directory names
}

func newReferenced() referenced {
	return referenced{files: map[string]bool{}, indexes: map[string]bool{}}
}

func (r referenced) add(m *pb.Manifest, indexSection []byte) error {
	for _, f := range m.GetFragments() {
		for _, df := range f.GetFiles() {
			r.files[dataDir+df.GetPath()] = true
		}
		if del := f.GetDeletionFile(); del != nil {
			r.files[deletionKey(f.GetId(), del)] = true
		}
	}
	if t := m.GetTransactionFile(); t != "" {
		r.files[transactionsDir+t] = true
	}
	if indexSection == nil {
		return nil
	}
	var is pb.IndexSection
	if err := proto.Unmarshal(indexSection, &is); err != nil {
		return fmt.Errorf("%w: version %d index section: %v", ErrCorrupt, m.GetVersion(), err)
	}
	for _, idx := range is.GetIndices() {
		r.indexes[indexDirName(idx)] = true
	}
	return nil
}

func indexDirName(m *pb.IndexMetadata) string {
	if u, err := uuid.FromBytes(m.GetUuid().GetUuid()); err == nil {
		return u.String()
	}
	return fmt.Sprintf("%x", m.GetUuid().GetUuid())
}

type versionEntry struct {
	version uint64
	key     string
	size    int64
	at      time.Time // commit time: the manifest's timestamp, else the object's
	man     *manifestFile
}

// Cleanup removes old versions of the table rooted at store and every file
// that only they reference, in Lance's semantics (cleanup_old_versions), so
// LanceDB, pylance and we agree on what a table keeps:
//
//   - kept: the latest version (and any committed after the cleanup began),
//     tagged versions (_refs/tags/), versions opts.Keep holds, versions
//     committed at or after opts.Before, and versions superseded within
//     opts.ReadGrace;
//   - removed: the other manifests, and each data, deletion, transaction
//     and index file that no kept manifest references, when a removed
//     manifest references it (verified) or it is older than UnverifiedAge
//     (or DeleteUnverified) and than the oldest kept version (a commit in
//     flight writes files no manifest references yet).
//
// Files go first, manifests last, oldest first: a crash at any point
// leaves every kept version whole, and the manifests still listed let the
// next cleanup verify and remove what this one did not reach.
func Cleanup(ctx context.Context, store objstore.Store, opts CleanupOptions) (*CleanupResult, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	latest, err := Open(ctx, store)
	if err != nil {
		return nil, err
	}
	tagged, err := taggedVersions(ctx, store)
	if err != nil {
		return nil, err
	}
	versions, err := listVersions(ctx, store)
	if err != nil {
		return nil, err
	}
	start := now()
	keep := func(i int) bool {
		e := versions[i]
		switch {
		case e.version >= latest.Version(), tagged[e.version]:
			return true
		case opts.Keep != nil && opts.Keep(e.version):
			return true
		case !opts.Before.IsZero() && !e.at.Before(opts.Before):
			return true
		}
		// Superseded when the next version was committed.
		return i+1 < len(versions) && start.Sub(versions[i+1].at) < opts.ReadGrace
	}
	kept, verified := newReferenced(), newReferenced()
	var old, keptEntries []versionEntry
	var earliestKept time.Time
	res := &CleanupResult{Latest: latest.Version()}
	for i, e := range versions {
		if keep(i) {
			if err := kept.add(e.man.manifest, e.man.indexSection); err != nil {
				return nil, err
			}
			if earliestKept.IsZero() || e.at.Before(earliestKept) {
				earliestKept = e.at
			}
			if res.OldestKept == 0 {
				res.OldestKept = e.version
			}
			res.VersionsKept++
			keptEntries = append(keptEntries, e)
			continue
		}
		if err := verified.add(e.man.manifest, e.man.indexSection); err != nil {
			return nil, err
		}
		old = append(old, e)
	}
	unverifiedBefore := start.Add(-UnverifiedAge)
	if opts.DeleteUnverified {
		unverifiedBefore = start
	}
	// A file no manifest references may be a commit in flight: it goes
	// only when older than UnverifiedAge (or DeleteUnverified) and, as in
	// Lance, older than the oldest kept version. Lance applies that last
	// bound to verified files too, so one old tag stops all its cleanup;
	// a file only removed versions reference is garbage at any age.
	unverifiedGone := func(o objstore.ObjectInfo) bool {
		return o.ModTime.Before(unverifiedBefore) && o.ModTime.Before(earliestKept)
	}
	var doomed []objstore.ObjectInfo
	var doomedIndexes []string
	for _, dir := range []string{dataDir, deletionsDir, transactionsDir} {
		infos, err := store.List(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("lance/table: cleanup: list %s: %w", dir, err)
		}
		for _, o := range infos {
			if kept.files[o.Key] || !cleanable(o.Key) {
				continue
			}
			if verified.files[o.Key] || unverifiedGone(o) {
				doomed = append(doomed, o)
			}
		}
	}
	infos, err := store.List(ctx, indicesDir)
	if err != nil {
		return nil, fmt.Errorf("lance/table: cleanup: list %s: %w", indicesDir, err)
	}
	goneIndex := map[string]bool{}
	for _, o := range infos {
		dir, _, ok := strings.Cut(strings.TrimPrefix(o.Key, indicesDir), "/")
		if !ok || kept.indexes[dir] {
			continue
		}
		if verified.indexes[dir] || unverifiedGone(o) {
			doomed = append(doomed, o)
			if !goneIndex[dir] {
				goneIndex[dir] = true
				doomedIndexes = append(doomedIndexes, dir)
			}
		}
	}
	if len(doomed) == 0 && len(old) == 0 {
		reportKept(latest, keptEntries, opts.Kept)
		return res, nil
	}
	// A tag or holder that appeared since the listing may name a version
	// about to go (CreateTag checks the manifest after writing its tag;
	// this check closes the rest of the window but a sliver).
	removing := make([]uint64, len(old))
	for i, e := range old {
		removing[i] = e.version
	}
	again, err := taggedVersions(ctx, store)
	if err != nil {
		return nil, err
	}
	for v := range again {
		if !tagged[v] && slices.Contains(removing, v) {
			return nil, fmt.Errorf("%w: a tag of version %d was created during the cleanup: run it again", ErrConflict, v)
		}
	}
	if opts.Recheck != nil {
		if err := opts.Recheck(ctx, removing); err != nil {
			return nil, err
		}
	}
	keys := make([]string, len(doomed))
	for i, o := range doomed {
		keys[i] = o.Key
	}
	if opts.Hook != nil {
		if err := opts.Hook("files", keys); err != nil {
			return res, err
		}
	}
	n, b, err := deleteAll(ctx, store, doomed)
	res.FilesRemoved += n
	res.BytesRemoved += b
	if err != nil {
		return res, err
	}
	if rd, ok := store.(dirRemover); ok {
		for _, d := range doomedIndexes {
			_ = rd.RemoveEmptyDir(ctx, indicesDir+d)
		}
	}
	mkeys := make([]string, len(old))
	minfos := make([]objstore.ObjectInfo, len(old))
	for i, e := range old {
		mkeys[i] = e.key
		minfos[i] = objstore.ObjectInfo{Key: e.key, Size: e.size}
	}
	if opts.Hook != nil {
		if err := opts.Hook("manifests", mkeys); err != nil {
			return res, err
		}
	}
	// One at a time, oldest first: a crash leaves a contiguous run of the
	// newest old versions, each still verifying its own files.
	for _, o := range minfos {
		if err := store.Delete(ctx, o.Key); err != nil {
			return res, fmt.Errorf("lance/table: cleanup: delete %s: %w", o.Key, err)
		}
		res.FilesRemoved++
		res.BytesRemoved += o.Size
		res.VersionsRemoved++
	}
	reportKept(latest, keptEntries, opts.Kept)
	return res, nil
}

// reportKept hands the kept versions to fn as Datasets sharing latest's
// store and cache, built as load builds one; a version load would refuse
// is left out (its reader checks it out and meets the error).
func reportKept(latest *Dataset, entries []versionEntry, fn func([]*Dataset)) {
	if fn == nil {
		return
	}
	var out []*Dataset
	for _, e := range entries {
		m := e.man.manifest
		_, n, ok := parseManifestName(strings.TrimPrefix(e.key, versionsDir))
		if !ok || m.GetReaderFeatureFlags()&^readableFlags != 0 || m.GetVersion() != e.version {
			continue
		}
		if df := m.GetDataFormat(); df != nil && df.GetVersion() != "" && df.GetVersion() != "2.0" {
			continue
		}
		sc, err := schema.FromProto(m.GetFields(), m.GetSchemaMetadata())
		if err != nil {
			continue
		}
		out = append(out, &Dataset{store: latest.store, manifest: m, schema: sc, indexSection: e.man.indexSection, naming: n, files: latest.files, projs: newProjections()})
	}
	fn(out)
}

// dirRemover is implemented by stores with real directories (local disk):
// an index's directory is removed once its files are.
type dirRemover interface {
	RemoveEmptyDir(ctx context.Context, prefix string) error
}

const indicesDir = "_indices/"

// cleanable reports whether key is a file kind cleanup owns in its
// directory (Lance leaves anything else alone).
func cleanable(key string) bool {
	switch {
	case strings.HasPrefix(key, dataDir):
		return path.Ext(key) == ".lance" && !strings.Contains(strings.TrimPrefix(key, dataDir), "/")
	case strings.HasPrefix(key, deletionsDir):
		return path.Ext(key) == ".arrow" || path.Ext(key) == ".bin"
	case strings.HasPrefix(key, transactionsDir):
		return path.Ext(key) == ".txn"
	}
	return false
}

func taggedVersions(ctx context.Context, store objstore.Store) (map[uint64]bool, error) {
	tags, err := ListTags(ctx, store)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]bool, len(tags))
	for _, t := range tags {
		out[t.Version] = true
	}
	return out, nil
}

// listVersions reads every manifest of the table, oldest first. A manifest
// that cannot be read fails the cleanup: a transient error must not make
// its files look unreferenced.
func listVersions(ctx context.Context, store objstore.Store) ([]versionEntry, error) {
	infos, err := store.List(ctx, versionsDir)
	if err != nil {
		return nil, fmt.Errorf("lance/table: cleanup: list versions: %w", err)
	}
	var out []versionEntry
	for _, o := range infos {
		v, _, ok := parseManifestName(strings.TrimPrefix(o.Key, versionsDir))
		if !ok || path.Dir(o.Key)+"/" != versionsDir {
			continue
		}
		out = append(out, versionEntry{version: v, key: o.Key, size: o.Size, at: o.ModTime})
	}
	// Each goroutine writes its own entry: no lock.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range out {
		g.Go(func() error {
			b, err := store.Get(gctx, out[i].key)
			if errors.Is(err, objstore.ErrNotFound) {
				return nil // removed by a concurrent cleanup: not ours to judge
			}
			var mf *manifestFile
			if err == nil {
				mf, err = decodeManifestFile(b)
			}
			if err != nil {
				return fmt.Errorf("lance/table: cleanup: read %s: %w", out[i].key, err)
			}
			out[i].man = mf
			if ts := mf.manifest.GetTimestamp(); ts != nil && (ts.GetSeconds() != 0 || ts.GetNanos() != 0) {
				out[i].at = time.Unix(ts.GetSeconds(), int64(ts.GetNanos()))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out = slices.DeleteFunc(out, func(e versionEntry) bool { return e.man == nil })
	slices.SortFunc(out, func(a, b versionEntry) int { return cmp.Compare(a.version, b.version) })
	return out, nil
}

// deleteAll deletes the objects in batches (objstore.DeleteKeys: 1000 a
// request on S3) and counts what went.
func deleteAll(ctx context.Context, store objstore.Store, objs []objstore.ObjectInfo) (int, int64, error) {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	err := objstore.DeleteKeys(ctx, store, keys)
	left := map[string]bool{}
	for _, k := range objstore.NotDeleted(err, keys) {
		left[k] = true
	}
	var n int
	var bytes int64
	for _, o := range objs {
		if !left[o.Key] {
			n++
			bytes += o.Size
		}
	}
	if err != nil {
		return n, bytes, fmt.Errorf("lance/table: cleanup: delete files: %w", err)
	}
	return n, bytes, nil
}

// ReferencedFiles returns the keys of the files this version references
// (data, deletion and transaction files, its manifest) and the index
// directories it references (each holds the index's files): the version's
// live files, what a cleanup that keeps only it leaves.
func (d *Dataset) ReferencedFiles() (files []string, indexDirs []string, err error) {
	ref := newReferenced()
	if err := ref.add(d.manifest, d.indexSection); err != nil {
		return nil, nil, err
	}
	files = append(files, d.naming.key(d.Version()))
	for k := range ref.files {
		files = append(files, k)
	}
	for u := range ref.indexes {
		indexDirs = append(indexDirs, indicesDir+u+"/")
	}
	slices.Sort(files)
	slices.Sort(indexDirs)
	return files, indexDirs, nil
}

// Versions lists the versions whose manifests are in the table, ascending:
// after a cleanup, the versions it kept and any committed since.
func Versions(ctx context.Context, store objstore.Store) ([]uint64, error) {
	infos, err := store.List(ctx, versionsDir)
	if err != nil {
		return nil, fmt.Errorf("lance/table: list versions: %w", err)
	}
	var out []uint64
	for _, o := range infos {
		if v, _, ok := parseManifestName(strings.TrimPrefix(o.Key, versionsDir)); ok && path.Dir(o.Key)+"/" == versionsDir {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
