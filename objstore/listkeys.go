package objstore

import (
	"context"
	"strings"
)

// KeyLister is implemented by stores that can list the keys under a prefix
// for less than their metadata: on local disk one directory read, where
// List stats every file. Cloud listings return sizes and times with the
// keys at no extra cost, so they do not implement it. It is optional:
// ListKeys falls back to List.
type KeyLister interface {
	// ListKeys returns the keys under prefix in byte order.
	ListKeys(ctx context.Context, prefix string) ([]string, error)
}

// ListKeys lists the keys under prefix in byte order. Where the store
// lists keys for less than their metadata (KeyLister, through the
// wrappers) it returns the keys alone and infos nil; elsewhere it returns
// List's infos too (their keys in keys), so that a caller that needs the
// metadata of one of the keys reads it with a Head only when infos is nil:
// one request on every store, and on local disk one directory read and
// one stat instead of a stat per file.
func ListKeys(ctx context.Context, r Reader, prefix string) (keys []string, infos []ObjectInfo, err error) {
	if kl, ok := r.(KeyLister); ok {
		keys, err = kl.ListKeys(ctx, prefix)
		return keys, nil, err
	}
	if w, ok := r.(keyForwarder); ok {
		return w.listKeys(ctx, prefix)
	}
	infos, err = r.List(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	return keysOf(infos), infos, nil
}

func keysOf(infos []ObjectInfo) []string {
	keys := make([]string, len(infos))
	for i, o := range infos {
		keys[i] = o.Key
	}
	return keys
}

// keyForwarder is a wrapper that passes ListKeys to the store it wraps
// (whichever of the two answers that store gives).
type keyForwarder interface {
	listKeys(ctx context.Context, prefix string) ([]string, []ObjectInfo, error)
}

var (
	_ KeyLister    = (*Local)(nil)
	_ keyForwarder = (*subStore)(nil)
	_ keyForwarder = (*SmallFiles)(nil)
	_ keyForwarder = (*Counting)(nil)
	_ keyForwarder = (*Faulty)(nil)
)

// ListKeys implements KeyLister: a prefix naming a directory of files
// costs one directory read; anything else (a partial name, or
// subdirectories) takes List.
func (l *Local) ListKeys(ctx context.Context, prefix string) ([]string, error) {
	fallback := func() ([]string, error) {
		infos, err := l.List(ctx, prefix)
		return keysOf(infos), err
	}
	ents, ok, err := l.dirEntries(ctx, prefix)
	if err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return fallback()
	}
	keys := make([]string, 0, len(ents))
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			continue
		}
		if !d.Type().IsRegular() {
			return fallback()
		}
		keys = append(keys, prefix+d.Name())
	}
	return keys, nil
}

func (s *subStore) listKeys(ctx context.Context, prefix string) ([]string, []ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	keys, infos, err := ListKeys(ctx, s.inner, s.prefix+prefix)
	if err != nil {
		return nil, nil, err
	}
	for i := range keys {
		keys[i] = strings.TrimPrefix(keys[i], s.prefix)
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, s.prefix)
	}
	return keys, infos, nil
}

func (s *SmallFiles) listKeys(ctx context.Context, prefix string) ([]string, []ObjectInfo, error) {
	return ListKeys(ctx, s.inner, prefix)
}

// listKeys is counted as OpList.
func (c *Counting) listKeys(ctx context.Context, prefix string) (keys []string, infos []ObjectInfo, err error) {
	d := c.start(OpList, 0)
	if err = c.wait(ctx); err == nil {
		keys, infos, err = ListKeys(ctx, c.inner, prefix)
	}
	c.finish(d, 0)
	return keys, infos, err
}

// listKeys has List's faults.
func (f *Faulty) listKeys(ctx context.Context, prefix string) (keys []string, infos []ObjectInfo, err error) {
	err = f.do(ctx, OpList, prefix, func() error { keys, infos, err = ListKeys(ctx, f.inner, prefix); return err })
	if err != nil {
		return nil, nil, err
	}
	return keys, infos, nil
}
