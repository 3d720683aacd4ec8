package rollout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
	"github.com/lance-context/lance-context/wal"
)

// storeSuffix names a store's dataset directory: {name}.rollout.lance.
const storeSuffix = ".rollout.lance"

// StoreURI returns where a store lives under a data directory (a path or
// an s3://, gs://, az:// URL): {dataDir}/{name}.rollout.lance.
func StoreURI(dataDir, name string) string {
	return strings.TrimSuffix(dataDir, "/") + "/" + name + storeSuffix
}

// registryDir holds one marker object per store, so stores can be listed
// without listing their data.
const registryDir = "_lc_stores/"

// ValidateName checks a store name: [A-Za-z0-9_][A-Za-z0-9._-]*, 1-128
// characters, not starting with "_" (reserved).
func ValidateName(name string) error {
	if !validName(name) {
		return invalid("invalid store name %q: use 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	return nil
}

// validName reports whether name is 1-128 of A-Z a-z 0-9 . _ -, starting
// with a letter or digit. (Checked on every request: a loop, not a regexp.)
func validName(name string) bool {
	if len(name) == 0 || len(name) > 128 || name[0] == '.' || name[0] == '-' || name[0] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ShardID derives a process's shard id from its instance id.
func ShardID(instanceID string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(instanceID)).String()
}

// Catalog is the set of stores under one data directory, as one process
// sees it: it opens stores lazily and writes to its own shard of each.
type Catalog struct {
	root  objstore.Store
	shard string
	opts  Options

	mu     sync.Mutex
	stores map[string]*Store
	uses   map[string]*storeUse // idle.go
	now    func() time.Time     // the clock of use (tests set it)
}

// NewCatalog returns the catalog of the stores under root.
func NewCatalog(root objstore.Store, shard string, opts Options) *Catalog {
	opts.setDefaults()
	c := &Catalog{root: root, shard: shard, opts: opts, stores: map[string]*Store{}, uses: map[string]*storeUse{}}
	c.opts.metrics.stores = c.Opened // the per-store gauges
	return c
}

// Shard returns this process's shard id.
func (c *Catalog) Shard() string { return c.shard }

func (c *Catalog) storeRoot(name string) objstore.Store {
	return objstore.Sub(c.root, name+storeSuffix)
}

// storeLog is where the writers of the store called name keep their WAL
// segment logs: on Options.LogFS when set, else as WALLog says.
func (c *Catalog) storeLog(name string) wal.Log {
	if c.opts.LogFS != nil {
		return wal.Log{FS: c.opts.LogFS, Dir: "/" + name + storeSuffix}
	}
	return WALLog(c.root, name)
}

// WALLog is where the WAL of the store called name under the data
// directory root keeps its segment logs: beside the store's data when root
// is a directory on the local file system (objstore.LocalPath), else
// nowhere (the zero wal.Log: WAL entries are objects in the store). It is
// the catalog's choice, and what a repair of the store's WAL must read.
func WALLog(root objstore.Store, name string) wal.Log {
	if dir, ok := objstore.LocalPath(root, name+storeSuffix); ok {
		return wal.Log{FS: vfs.Default, Dir: dir, Objects: true}
	}
	return wal.Log{}
}

// Create makes a new store. ErrExists if it exists.
func (c *Catalog) Create(ctx context.Context, name string) (*Store, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := createStore(ctx, c.storeRoot(name)); err != nil {
		if errors.Is(err, ErrExists) {
			// A create that failed after making the table but before the
			// registry marker left the store unlisted; list it now.
			_ = c.root.Put(ctx, registryDir+name, nil)
			return nil, fmt.Errorf("%w: %q", ErrExists, name)
		}
		return nil, err
	}
	if err := c.root.Put(ctx, registryDir+name, nil); err != nil {
		return nil, fmt.Errorf("rollout: register store %q: %w", name, err)
	}
	return c.Open(ctx, name)
}

// Open returns an existing store. ErrNotFound if it does not exist. The
// store stays open at least until ctx is done (idle.go).
func (c *Catalog) Open(ctx context.Context, name string) (*Store, error) {
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	c.mu.Lock()
	s, ok := c.stores[name]
	if ok {
		c.use(ctx, name)
	}
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	// Open without the lock: one slow store must not stall the others.
	s, err := openStore(ctx, name, c.storeRoot(name), c.storeLog(name), c.shard, c.opts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stores[name]; ok {
		c.use(ctx, name)
		_ = s.Close(ctx)
		return prev, nil // opened concurrently; keep the first
	}
	c.stores[name] = s
	c.use(ctx, name)
	return s, nil
}

// List returns the names of every store, sorted.
func (c *Catalog) List(ctx context.Context) ([]string, error) {
	objs, err := c.root.List(ctx, registryDir)
	if err != nil {
		return nil, fmt.Errorf("rollout: list stores: %w", err)
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, strings.TrimPrefix(o.Key, registryDir))
	}
	sort.Strings(names)
	return names, nil
}

// Opened returns the stores this process has open.
func (c *Catalog) Opened() []*Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Store, 0, len(c.stores))
	for _, s := range c.stores {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Delete removes a store and all its data. Writers of other processes are
// not stopped; their next write fails.
func (c *Catalog) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if _, err := c.root.Head(ctx, registryDir+name); errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: store %q", ErrNotFound, name)
	}
	c.mu.Lock()
	s := c.stores[name]
	delete(c.stores, name)
	c.mu.Unlock()
	if s != nil {
		defer s.noteCommit() // a read through a kept handle lists again
		s.mu.Lock()
		w := s.writer.Swap(nil)
		s.closed = true
		s.mu.Unlock()
		if w != nil {
			w.Abandon()
		}
	}
	// Unregister first: a half-deleted store is then invisible, not broken.
	if err := c.root.Delete(ctx, registryDir+name); err != nil {
		return fmt.Errorf("rollout: delete store %q: %w", name, err)
	}
	root := c.storeRoot(name)
	objs, err := root.List(ctx, "")
	if err != nil {
		return fmt.Errorf("rollout: delete store %q: %w", name, err)
	}
	for _, o := range objs {
		if err := root.Delete(ctx, o.Key); err != nil {
			return fmt.Errorf("rollout: delete store %q: %w", name, err)
		}
	}
	// On a file system the emptied directories remain, and LanceDB lists
	// an empty {name}.rollout.lance/ as a table it then fails to open.
	if p, ok := objstore.LocalPath(c.root, name+storeSuffix); ok {
		if err := removeEmptyDirs(vfs.Default, p); err != nil {
			return fmt.Errorf("rollout: delete store %q: %w", name, err)
		}
	}
	return nil
}

// removeEmptyDirs removes dir and the directories under it, deepest first,
// if they hold no files. A file left (a concurrent writer's) keeps its
// directories, and that is not an error; nor is dir being a file or gone.
func removeEmptyDirs(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // gone, or a file: kept
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeEmptyDirs(fsys, filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	if err := fsys.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	return nil
}

// Close seals every open store's buffered rows and releases its shard.
func (c *Catalog) Close(ctx context.Context) error {
	var errs []error
	for _, s := range c.Opened() {
		if err := s.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("store %s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// Recover replays this process's shard of every store that has one: rows a
// crashed predecessor (same instance id) acknowledged but never sealed
// become readable without waiting for the next write to that store. Run it
// at startup; stores are independent, so one failure does not stop the
// rest, and up to recoverParallel recover at once (a claim is a chain of
// ~20 dependent requests: on S3 a worker with many stores waited for each
// store's after the other's).
func (c *Catalog) Recover(ctx context.Context) error {
	names, err := c.List(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(names))
	var g errgroup.Group // every store's error is kept, not the first
	g.SetLimit(recoverParallel)
	for i, name := range names {
		g.Go(func() error {
			if err := c.recover(ctx, name); err != nil {
				errs[i] = fmt.Errorf("store %s: %w", name, err)
			}
			return nil
		})
	}
	g.Wait()
	return errors.Join(errs...)
}

// recoverParallel bounds the stores Recover recovers at once.
const recoverParallel = 8

// recover claims this process's shard of store name, if it has one.
func (c *Catalog) recover(ctx context.Context, name string) error {
	// The holder read says whether the shard exists, and the claim below
	// takes it as its first look (claimguard.go).
	h, err := wal.ReadHolder(ctx, c.storeRoot(name), c.shard)
	if errors.Is(err, wal.ErrNoShard) {
		return nil
	} else if err != nil {
		return err
	}
	// Opened for this process's upkeep, not held: an idle store may
	// close once recovered (idle.go).
	s, err := c.Open(context.WithoutCancel(ctx), name)
	if err != nil {
		return err
	}
	// The shard exists (above): claim it, which replays and seals, without
	// Flush's own look for its manifest (four round trips more on S3).
	_, err = s.walWriterSeen(ctx, h)
	return err
}
