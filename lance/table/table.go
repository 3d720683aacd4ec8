package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

// Dataset is one immutable version of a table. Reads through it see exactly
// that version; commits return a new Dataset.
type Dataset struct {
	store        objstore.Store
	manifest     *pb.Manifest
	schema       *schema.Schema
	indexSection []byte
	naming       naming
	files        *fileCache
	plainDicts   bool // a TakePlain view: dictionary columns read plain
	projs        *projections
}

// Open returns the latest version of the table rooted at store.
//
// A table with V2 manifest names (what Create makes; names sort newest
// first) is found with one listing of the first names in _versions/, and
// its manifest is decoded once per process: a later Open of the same
// version costs that one listing (see fileCache). Other tables take the
// hint and probe upward.
func Open(ctx context.Context, store objstore.Store) (*Dataset, error) {
	return DefaultCache().Open(ctx, store)
}

// Open is the package's Open for a table whose Datasets share c.
func (c *Cache) Open(ctx context.Context, store objstore.Store) (*Dataset, error) {
	return c.f.open(ctx, store)
}

func (f *fileCache) open(ctx context.Context, store objstore.Store) (*Dataset, error) {
	for attempt := 0; ; attempt++ {
		info, v, n, err := latestVersionInfo(ctx, store)
		if err != nil {
			return nil, err
		}
		if info.Key == "" {
			return f.load(ctx, store, v, n)
		}
		if d, ok := f.manifest(store, info.Key, info); ok {
			return d, nil
		}
		d, err := f.load(ctx, store, v, n)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 2 {
			continue // cleaned up since the listing: it is no longer the latest
		}
		if err != nil {
			return nil, err
		}
		f.putManifest(store, info.Key, info, d)
		return d, nil
	}
}

// Checkout returns the given version of the table.
func Checkout(ctx context.Context, store objstore.Store, version uint64) (*Dataset, error) {
	return DefaultCache().Checkout(ctx, store, version)
}

// Checkout is the package's Checkout for a table whose Datasets share c.
func (c *Cache) Checkout(ctx context.Context, store objstore.Store, version uint64) (*Dataset, error) {
	_, n, err := latestVersion(ctx, store)
	if err != nil {
		return nil, err
	}
	return c.f.load(ctx, store, version, n)
}

func (f *fileCache) load(ctx context.Context, store objstore.Store, version uint64, n naming) (*Dataset, error) {
	key := n.key(version)
	b, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("lance/table: read version %d: %w", version, err)
	}
	mf, err := decodeManifestFile(b)
	if err != nil {
		return nil, fmt.Errorf("lance/table: %s: %w", key, err)
	}
	if extra := mf.manifest.GetReaderFeatureFlags() &^ readableFlags; extra != 0 {
		return nil, fmt.Errorf("%w: reader flags %#x", ErrUnsupportedFeature, extra)
	}
	if mf.manifest.GetVersion() != version {
		return nil, fmt.Errorf("%w: %s holds version %d", ErrCorrupt, key, mf.manifest.GetVersion())
	}
	if df := mf.manifest.GetDataFormat(); df != nil && df.GetVersion() != "" && df.GetVersion() != "2.0" {
		return nil, fmt.Errorf("lance/table: data storage version %s is not supported (only 2.0)", df.GetVersion())
	}
	s, err := schema.FromProto(mf.manifest.GetFields(), mf.manifest.GetSchemaMetadata())
	if err != nil {
		return nil, fmt.Errorf("lance/table: version %d schema: %w", version, err)
	}
	return &Dataset{store: store, manifest: mf.manifest, schema: s, indexSection: mf.indexSection, naming: n, files: f, projs: newProjections()}, nil
}

// listFirstNames is how many names of _versions/ the second listing of
// firstVersions reads: the newest V2 manifest comes first, unless names
// that sort before every manifest (a writer's temporary files) are there.
const listFirstNames = 8

// firstVersions lists the first names of _versions/: the first alone,
// which is a manifest on every table at rest, and only when it is not,
// listFirstNames. Each costs one request; on local disk a stat per name,
// which every read of a table pays.
func firstVersions(ctx context.Context, store objstore.Store) ([]objstore.ObjectInfo, error) {
	infos, err := objstore.ListFirst(ctx, store, versionsDir, 1)
	if err != nil || len(infos) == 0 {
		return infos, err
	}
	if _, _, ok := parseManifestName(strings.TrimPrefix(infos[0].Key, versionsDir)); ok && path.Dir(infos[0].Key)+"/" == versionsDir {
		return infos, nil
	}
	return objstore.ListFirst(ctx, store, versionsDir, listFirstNames)
}

// latestVersionInfo finds the newest version. For a V2 table it lists the
// first names of _versions/ (one request) and returns the newest
// manifest's listing entry; otherwise info is zero and the version comes
// from the hint (latestProbed).
func latestVersionInfo(ctx context.Context, store objstore.Store) (info objstore.ObjectInfo, v uint64, n naming, err error) {
	infos, err := firstVersions(ctx, store)
	if err != nil {
		return info, 0, 0, fmt.Errorf("lance/table: list versions: %w", err)
	}
	for _, o := range infos {
		v, n, ok := parseManifestName(strings.TrimPrefix(o.Key, versionsDir))
		if !ok || path.Dir(o.Key)+"/" != versionsDir {
			continue
		}
		if n == namingV2 {
			return o, v, n, nil
		}
		break // a V1 table: its names do not sort by version
	}
	if len(infos) == 0 {
		return info, 0, 0, ErrNoTable
	}
	v, n, err = latestProbed(ctx, store)
	return objstore.ObjectInfo{}, v, n, err
}

// latestVersion finds the newest version. It trusts nothing but the
// manifests themselves: the hint only says where to start probing upward.
func latestVersion(ctx context.Context, store objstore.Store) (uint64, naming, error) {
	if infos, err := firstVersions(ctx, store); err == nil {
		if len(infos) == 0 {
			return 0, 0, ErrNoTable
		}
		for _, o := range infos {
			if v, n, ok := parseManifestName(strings.TrimPrefix(o.Key, versionsDir)); ok && n == namingV2 && path.Dir(o.Key)+"/" == versionsDir {
				return v, n, nil
			}
		}
	}
	return latestProbed(ctx, store)
}

// latestProbed finds the newest version from the hint, probing upward, or
// by listing every version.
func latestProbed(ctx context.Context, store objstore.Store) (uint64, naming, error) {
	if b, err := store.Get(ctx, hintKey); err == nil {
		var h struct {
			Version uint64 `json:"version"`
		}
		if json.Unmarshal(b, &h) == nil && h.Version > 0 {
			for _, n := range []naming{namingV2, namingV1} {
				if _, err := store.Head(ctx, n.key(h.Version)); err == nil {
					v, err := probeUp(ctx, store, h.Version, n)
					return v, n, err
				}
			}
		}
	}
	infos, err := store.List(ctx, versionsDir)
	if err != nil {
		return 0, 0, fmt.Errorf("lance/table: list versions: %w", err)
	}
	var best uint64
	var bestNaming naming
	found := false
	for _, o := range infos {
		v, n, ok := parseManifestName(path.Base(o.Key))
		if !ok || path.Dir(o.Key)+"/" != versionsDir {
			continue
		}
		if !found || v > best {
			best, bestNaming, found = v, n, true
		}
		if n == namingV2 {
			break // lexical order: the first V2 name is the newest
		}
	}
	if !found {
		return 0, 0, ErrNoTable
	}
	return best, bestNaming, nil
}

func probeUp(ctx context.Context, store objstore.Store, v uint64, n naming) (uint64, error) {
	for {
		_, err := store.Head(ctx, n.key(v+1))
		if errors.Is(err, objstore.ErrNotFound) {
			return v, nil
		}
		if err != nil {
			return 0, fmt.Errorf("lance/table: probe version %d: %w", v+1, err)
		}
		v++
	}
}

// Version returns the dataset version.
func (d *Dataset) Version() uint64 { return d.manifest.GetVersion() }

// Schema returns the table schema.
func (d *Dataset) Schema() *schema.Schema { return d.schema }

// Fragments returns the fragments of this version. Callers must not modify them.
func (d *Dataset) Fragments() []*pb.DataFragment { return d.manifest.GetFragments() }

// Config returns the table config (Manifest.config). Callers must not modify it.
func (d *Dataset) Config() map[string]string { return d.manifest.GetConfig() }

// Manifest returns the decoded manifest. Callers must not modify it.
func (d *Dataset) Manifest() *pb.Manifest { return d.manifest }

// HasIndexSection reports whether the version carries index metadata.
func (d *Dataset) HasIndexSection() bool { return d.indexSection != nil }

// CountRows returns the number of live rows, from the manifest alone.
func (d *Dataset) CountRows() int64 {
	var n int64
	for _, f := range d.manifest.GetFragments() {
		n += liveRows(f)
	}
	return n
}

func liveRows(f *pb.DataFragment) int64 {
	return int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
}

func writeHint(ctx context.Context, store objstore.Store, v uint64) error {
	return store.Put(ctx, hintKey, []byte(`{"version":`+strconv.FormatUint(v, 10)+`}`))
}
