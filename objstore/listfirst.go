package objstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FirstLister is implemented by stores that can list the first n keys under
// a prefix, in byte order, with one request for n up to a page (S3's
// max-keys and GCS's maxResults, 1000 a page; Azure's maxresults, 5000).
// It is optional: ListFirst falls back to List.
type FirstLister interface {
	ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error)
}

// ListFirst returns the first n objects under prefix in byte order of key
// (fewer when there are fewer). On a store that implements FirstLister it
// costs one request whatever the number of keys under prefix; elsewhere it
// lists them all. Readers use it to find the newest of names that sort
// newest first (Lance's V2 manifest names).
func ListFirst(ctx context.Context, r Reader, prefix string, n int) ([]ObjectInfo, error) {
	if n <= 0 {
		return nil, nil
	}
	if fl, ok := r.(FirstLister); ok {
		return fl.ListFirst(ctx, prefix, n)
	}
	out, err := r.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

var (
	_ FirstLister = (*subStore)(nil)
	_ FirstLister = (*Counting)(nil)
	_ FirstLister = (*Faulty)(nil)
)

// ListFirst implements FirstLister.
func (s *subStore) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := ListFirst(ctx, s.inner, s.prefix+prefix, n)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, s.prefix)
	}
	return infos, nil
}

// ListFirst implements FirstLister, counted as OpList.
func (c *Counting) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	d := c.start(OpList, 0)
	var out []ObjectInfo
	err := c.wait(ctx)
	if err == nil {
		out, err = ListFirst(ctx, c.inner, prefix, n)
	}
	c.finish(d, 0)
	return out, err
}

// ListFirst implements FirstLister; its faults are List's.
func (f *Faulty) ListFirst(ctx context.Context, prefix string, n int) (infos []ObjectInfo, err error) {
	err = f.do(ctx, OpList, prefix, func() error { infos, err = ListFirst(ctx, f.inner, prefix, n); return err })
	if err != nil {
		return nil, err
	}
	return infos, nil
}

var _ FirstLister = (*Local)(nil)

// ListFirst implements FirstLister. For a prefix naming a directory of
// files it reads that directory's names (sorted by the OS call) and looks
// up only the first n; anything else (a partial name, subdirectories among
// the first names) takes List.
func (l *Local) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	fallback := func() ([]ObjectInfo, error) {
		out, err := l.List(ctx, prefix)
		if len(out) > n {
			out = out[:n]
		}
		return out, err
	}
	ents, ok, err := l.dirEntries(ctx, prefix)
	if err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return fallback()
	}
	var out []ObjectInfo
	for _, d := range ents {
		if len(out) == n {
			break
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			continue
		}
		if !d.Type().IsRegular() {
			return fallback()
		}
		fi, err := d.Info()
		if err != nil {
			if notFound(err) {
				continue
			}
			return nil, fmt.Errorf("objstore: local list %q: %w", prefix, err)
		}
		out = append(out, ObjectInfo{Key: prefix + d.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// dirEntries reads the directory a prefix ending in "/" names, sorted by
// name (none when it does not exist); ok is false for any other prefix,
// which the caller lists with List. The entries may be shared with other
// callers (readDir): they must not be modified.
func (l *Local) dirEntries(ctx context.Context, prefix string) (ents []os.DirEntry, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, false, err
	}
	if !strings.HasSuffix(prefix, "/") {
		return nil, false, nil
	}
	ents, err = readDir(filepath.Join(l.root, filepath.FromSlash(prefix)))
	if err != nil {
		if notFound(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("objstore: local list %q: %w", prefix, err)
	}
	return ents, true, nil
}
