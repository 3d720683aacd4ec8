package objstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/lance-context/lance-context/vfs"
)

// Local is a Store in a directory tree on a local (POSIX) filesystem. Keys map
// to paths below the root with '/' as the separator. See the package
// documentation for its durability and atomicity guarantees.
type Local struct {
	root string
}

var _ Store = (*Local)(nil)

// NewLocal returns a store rooted at dir, creating dir (durably) if missing.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("objstore: local: empty root directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: local root %q: %w", dir, err)
	}
	if err := ensureDir(abs); err != nil {
		return nil, fmt.Errorf("objstore: local root %q: %w", dir, err)
	}
	return &Local{root: abs}, nil
}

// Root returns the directory the store is rooted at.
func (l *Local) Root() string { return l.root }

// LocalPath returns the filesystem path of key, for data kept in files the
// caller manages itself (the WAL's segment files).
func (l *Local) LocalPath(key string) (string, bool) {
	p, err := l.path(key)
	return p, err == nil
}

func (l *Local) path(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// notFound reports whether err means "no object here": the path is missing,
// a path component is a file, or the path is a directory.
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

func (l *Local) open(ctx context.Context, key string) (*os.File, fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	p, err := l.path(key)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		if notFound(err) {
			return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, nil, fmt.Errorf("objstore: local get %s: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("objstore: local stat %s: %w", key, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return f, fi, nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, key string) ([]byte, error) {
	return l.GetRange(ctx, key, 0, 1<<62)
}

// GetRange implements Store. It reads with pread (ReadAt).
// GetRangeInto reads exactly len(dst) bytes at offset into dst (see
// RangeIntoReader): a scan reads large pages straight into its output
// buffers instead of into a fresh buffer and then copying.
func (l *Local) GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) error {
	f, fi, err := l.open(ctx, key)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := CheckRange(key, fi.Size(), offset, int64(len(dst))); err != nil {
		return err
	}
	if offset+int64(len(dst)) > fi.Size() {
		return fmt.Errorf("%w: %s: [%d, +%d) runs past the end (%d bytes)", ErrInvalidRange, key, offset, len(dst), fi.Size())
	}
	n, err := f.ReadAt(dst, offset)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(dst)) {
		return fmt.Errorf("objstore: local read %s: %w", key, err)
	}
	return nil
}

func (l *Local) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	f, fi, err := l.open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	end, err := CheckRange(key, fi.Size(), offset, length)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, end-offset)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, fmt.Errorf("objstore: local read %s: %w", key, err)
	}
	return buf, nil
}

// Head implements Store.
func (l *Local) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	p, err := l.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		if notFound(err) {
			return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return ObjectInfo{}, fmt.Errorf("objstore: local head %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Put implements Store: temporary file, fsync, rename over the name, fsync
// the directory.
func (l *Local) Put(ctx context.Context, key string, data []byte) error {
	w, err := l.create(ctx, key)
	if err != nil {
		return err
	}
	if _, err := w.f.Write(data); err != nil {
		w.Abort()
		return fmt.Errorf("objstore: local put %s: %w", key, vfs.NoSpace(err))
	}
	return w.Close()
}

// PutIfAbsent implements Store: temporary file, fsync, link(2) to the name (fails
// with EEXIST if it exists, across processes), remove the temporary name,
// fsync the directory.
func (l *Local) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := ensureDir(dir); err != nil {
		return fmt.Errorf("objstore: local put %s: %w", key, vfs.NoSpace(err))
	}
	f, tmp, err := createTemp(dir)
	if err != nil {
		return fmt.Errorf("objstore: local put %s: %w", key, vfs.NoSpace(err))
	}
	defer os.Remove(tmp) // no-op once removed below
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("objstore: local put %s: %w", key, vfs.NoSpace(err))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, key)
		}
		return fmt.Errorf("objstore: local put %s: %w", key, vfs.NoSpace(err))
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("objstore: local put %s: remove temporary file: %w", key, err)
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("objstore: local put %s: %w", key, err)
	}
	return nil
}

// Delete implements Store. Directories left empty are kept: removing them
// could race with a concurrent write below them.
func (l *Local) Delete(ctx context.Context, key string) error {
	return l.remove(ctx, key, true)
}

// remove unlinks the object key, then, when durable, syncs its directory.
func (l *Local) remove(ctx context.Context, key string, durable bool) error {
	dir, err := l.unlink(ctx, key)
	if err != nil || dir == "" || !durable {
		return err
	}
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("objstore: local delete %s: %w", key, err)
	}
	return nil
}

// unlink removes the object key and returns its directory, or "" when
// there was no such object.
func (l *Local) unlink(ctx context.Context, key string) (dir string, err error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p, err := l.path(key)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if notFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("objstore: local delete %s: %w", key, err)
	}
	if fi.IsDir() {
		return "", nil // no object of that name
	}
	if err := os.Remove(p); err != nil {
		if notFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("objstore: local delete %s: %w", key, err)
	}
	return filepath.Dir(p), nil
}

// List implements Store. It walks only the directories that can hold keys
// with the prefix, skips temporary files, and sorts the keys in byte order.
func (l *Local) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	start := l.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(l.root, filepath.FromSlash(prefix[:i]))
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && notFound(err) {
				return filepath.SkipAll
			}
			if notFound(err) { // removed while walking
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p == start || p == l.root {
				return nil
			}
			// Descend only if keys below can match the prefix.
			dk := key + "/"
			if strings.HasPrefix(dk, prefix) || strings.HasPrefix(prefix, dk) {
				return nil
			}
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) || !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if notFound(err) {
				return nil
			}
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: local list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Create implements Store. Data streams into a temporary file in the target
// directory (through a small buffer); Close fsyncs it and renames it over
// the name.
func (l *Local) Create(ctx context.Context, key string) (ObjectWriter, error) {
	w, err := l.create(ctx, key)
	if err != nil {
		return nil, err
	}
	w.bw = bufio.NewWriterSize(w.f, 256<<10)
	return w, nil
}

func (l *Local) create(ctx context.Context, key string) (*localWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(p)
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("objstore: local create %s: %w", key, vfs.NoSpace(err))
	}
	f, tmp, err := createTemp(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: local create %s: %w", key, vfs.NoSpace(err))
	}
	return &localWriter{ctx: ctx, key: key, path: p, tmp: tmp, f: f}, nil
}

type localWriter struct {
	ctx       context.Context
	key       string
	path, tmp string
	f         *os.File
	bw        *bufio.Writer // nil: write to f directly
	written   int64         // bytes given to Write
	flushed   int64         // bytes whose writeback was started
	done      bool
	committed bool
}

func (w *localWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriterDone
	}
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	var n int
	var err error
	if w.bw != nil {
		n, err = w.bw.Write(p)
	} else {
		n, err = w.f.Write(p)
	}
	if err != nil {
		return n, fmt.Errorf("objstore: local write %s: %w", w.key, vfs.NoSpace(err))
	}
	w.written += int64(n)
	inFile := w.written
	if w.bw != nil {
		inFile -= int64(w.bw.Buffered())
	}
	if inFile-w.flushed >= writebackBytes {
		startWriteback(w.f, w.flushed, inFile-w.flushed)
		w.flushed = inFile
	}
	return n, nil
}

// writebackBytes is how much a writer lets pile up in the page cache
// before it starts writing it back (see startWriteback).
const writebackBytes = 8 << 20

func (w *localWriter) Close() error {
	if w.done {
		return errWriterDone
	}
	w.done = true
	err := w.ctx.Err()
	if err == nil && w.bw != nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err == nil {
		err = os.Rename(w.tmp, w.path)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(w.path))
		w.committed = true
	}
	if err != nil {
		if !w.committed {
			os.Remove(w.tmp)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return fmt.Errorf("objstore: local commit %s: %w", w.key, vfs.NoSpace(err))
	}
	return nil
}

func (w *localWriter) Abort() error {
	w.done = true
	if w.committed {
		return nil
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	if err := os.Remove(w.tmp); err != nil && !notFound(err) {
		return fmt.Errorf("objstore: local abort %s: %w", w.key, err)
	}
	return nil
}

// createTemp creates a new temporary file (mode 0644) in dir.
func createTemp(dir string) (*os.File, string, error) {
	for range 100 {
		name := filepath.Join(dir, tmpPrefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("cannot create a temporary file in %s", dir)
}

// ensureDir creates dir and its missing parents, fsyncing each parent whose
// entries changed, so that a file later created in dir survives a crash.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := ensureDir(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// Sync the parent even if another process created dir: it may not have
	// synced it yet.
	return SyncDir(parent)
}

// SyncDir fsyncs a directory, making entries created or removed in it
// durable (vfs.Default's, so the object store and the WAL's segment log
// sync directories one way).
func SyncDir(dir string) error { return vfs.Default.SyncDir(dir) }

// RemoveEmptyDir removes the directory under prefix when it holds nothing
// (directories are not objects, but on local disk an emptied one stays
// behind and every listing of its parent pays for it). A directory that is
// missing or not empty is left alone without error. Callers use it only for
// directories nothing writes into again (a removed index's).
func (l *Local) RemoveEmptyDir(ctx context.Context, prefix string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.path(strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !notFound(err) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("objstore: local remove dir %s: %w", prefix, err)
	}
	return nil
}

// LocalPath returns the file of key when s keeps its objects as files on
// the local file system (a Local, or Sub, Counting or SmallFiles of one),
// for data a caller keeps in files of its own beside the objects: rollout's
// catalog puts a store's WAL segment log there. ok is false for every
// other store.
func LocalPath(s Reader, key string) (path string, ok bool) {
	if lp, is := s.(localPather); is {
		return lp.LocalPath(key)
	}
	return "", false
}

// localPather is a store whose objects are files (see LocalPath).
type localPather interface {
	LocalPath(key string) (string, bool)
}
