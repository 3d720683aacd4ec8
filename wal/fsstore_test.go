package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// fsStore keeps objects as files under root on a vfs.FS, durable as the
// local store makes them (a file flushed, renamed into place, its
// directory flushed), so that a power cut of a MemFS takes what was not.
// Tests put a shard's generation files in it, beside a segment log on the
// same file system, for seals in place.
type fsStore struct {
	fs   vfs.FS
	root string
}

func (s *fsStore) path(key string) string { return path.Join(s.root, key) }

func (s *fsStore) read(key string) ([]byte, error) {
	f, err := s.fs.Open(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", objstore.ErrNotFound, key)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && n > 0 {
		return nil, err
	}
	return b, nil
}

func (s *fsStore) Get(_ context.Context, key string) ([]byte, error) { return s.read(key) }

func (s *fsStore) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	b, err := s.read(key)
	if err != nil {
		return nil, err
	}
	if off > int64(len(b)) {
		return nil, fmt.Errorf("range %d past the end of %s", off, key)
	}
	return b[off:min(off+n, int64(len(b)))], nil
}

func (s *fsStore) Head(_ context.Context, key string) (objstore.ObjectInfo, error) {
	b, err := s.read(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	return objstore.ObjectInfo{Key: key, Size: int64(len(b))}, nil
}

func (s *fsStore) Put(_ context.Context, key string, data []byte) error {
	p := s.path(key)
	dir := path.Dir(p)
	if err := mkdirAllDurable(s.fs, s.root, dir); err != nil {
		return err
	}
	tmp := p + ".tmp"
	_ = s.fs.Remove(tmp)
	f, err := s.fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, p)
	}
	if err == nil {
		err = s.fs.SyncDir(dir)
	}
	return err
}

func (s *fsStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if _, err := s.read(key); err == nil {
		return fmt.Errorf("%w: %s", objstore.ErrExists, key)
	}
	return s.Put(ctx, key, data)
}

func (s *fsStore) Delete(_ context.Context, key string) error {
	if err := s.fs.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *fsStore) List(_ context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	var out []objstore.ObjectInfo
	var walk func(dir, key string) error
	walk = func(dir, key string) error {
		names, err := s.fs.List(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range names {
			k := strings.TrimPrefix(key+"/"+n, "/")
			if !strings.HasPrefix(k, prefix) && !strings.HasPrefix(prefix, k+"/") {
				continue
			}
			if _, err := s.fs.List(path.Join(dir, n)); err == nil {
				if err := walk(path.Join(dir, n), k); err != nil {
					return err
				}
				continue
			}
			if strings.HasSuffix(n, ".tmp") {
				continue
			}
			b, err := s.read(k)
			if err != nil {
				return err
			}
			out = append(out, objstore.ObjectInfo{Key: k, Size: int64(len(b))})
		}
		return nil
	}
	if err := walk(s.root, ""); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *fsStore) Create(ctx context.Context, key string) (objstore.ObjectWriter, error) {
	return &fsObject{s: s, ctx: ctx, key: key}, nil
}

// fsObject buffers a streamed object and puts it at Close.
type fsObject struct {
	bytes.Buffer
	s      *fsStore
	ctx    context.Context
	key    string
	closed bool
}

func (o *fsObject) Close() error {
	if o.closed {
		return errors.New("closed twice")
	}
	o.closed = true
	return o.s.Put(o.ctx, o.key, o.Bytes())
}

func (o *fsObject) Abort() error { o.closed = true; return nil }

// genSplit is a store whose generation files (keys with /gen/) are in gens
// and every other object in rest.
type genSplit struct {
	rest, gens objstore.Store
}

func (g genSplit) pick(key string) objstore.Store {
	if strings.Contains(key, "/gen/") {
		return g.gens
	}
	return g.rest
}

func (g genSplit) Get(ctx context.Context, key string) ([]byte, error) {
	return g.pick(key).Get(ctx, key)
}

func (g genSplit) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return g.pick(key).GetRange(ctx, key, off, n)
}

func (g genSplit) Put(ctx context.Context, key string, data []byte) error {
	return g.pick(key).Put(ctx, key, data)
}

func (g genSplit) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return g.pick(key).PutIfAbsent(ctx, key, data)
}

func (g genSplit) Delete(ctx context.Context, key string) error {
	return g.pick(key).Delete(ctx, key)
}

func (g genSplit) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	return g.pick(key).Head(ctx, key)
}

func (g genSplit) Create(ctx context.Context, key string) (objstore.ObjectWriter, error) {
	return g.pick(key).Create(ctx, key)
}

func (g genSplit) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	a, err := g.rest.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	b, err := g.gens.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := append(a, b...)
	slices.SortFunc(out, func(x, y objstore.ObjectInfo) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}
