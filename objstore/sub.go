package objstore

import (
	"context"
	"fmt"
	"strings"
)

// Sub returns a view of s rooted at prefix: key k of the view is key
// prefix+"/"+k of s, and List returns keys relative to the view's root.
// Leading and trailing '/' of prefix are ignored; an empty prefix returns s.
// Sub panics if prefix is not a valid key (see ValidateKey): a sub-root is
// configuration, not data.
func Sub(s Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s
	}
	if err := ValidateKey(prefix); err != nil {
		panic(fmt.Sprintf("objstore.Sub: %v", err))
	}
	if sub, ok := s.(*subStore); ok {
		return &subStore{inner: sub.inner, prefix: sub.prefix + prefix + "/"}
	}
	return &subStore{inner: s, prefix: prefix + "/"}
}

type subStore struct {
	inner  Store
	prefix string // ends with '/'
}

func (s *subStore) key(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

func (s *subStore) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.Get(ctx, k)
}

// GetRangeInto forwards to the inner store when it supports it.
func (s *subStore) GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	if in, ok := s.inner.(RangeIntoReader); ok {
		return in.GetRangeInto(ctx, k, offset, dst)
	}
	b, err := s.inner.GetRange(ctx, k, offset, int64(len(dst)))
	if err != nil {
		return err
	}
	if len(b) != len(dst) {
		return fmt.Errorf("%w: %s: [%d, +%d) runs past the end", ErrInvalidRange, key, offset, len(dst))
	}
	copy(dst, b)
	return nil
}

func (s *subStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.GetRange(ctx, k, offset, length)
}

func (s *subStore) Put(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.Put(ctx, k, data)
}

func (s *subStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.PutIfAbsent(ctx, k, data)
}

func (s *subStore) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return s.inner.Delete(ctx, k)
}

func (s *subStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := s.key(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := s.inner.Head(ctx, k)
	info.Key = strings.TrimPrefix(info.Key, s.prefix)
	return info, err
}

func (s *subStore) Create(ctx context.Context, key string) (ObjectWriter, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	return s.inner.Create(ctx, k)
}

func (s *subStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := s.inner.List(ctx, s.prefix+prefix)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, s.prefix)
	}
	return infos, nil
}

// LocalPath forwards to the inner store when it is on a local filesystem.
func (s *subStore) LocalPath(key string) (string, bool) {
	k, err := s.key(key)
	if err != nil {
		return "", false
	}
	return LocalPath(s.inner, k)
}

// Discard forwards to the inner store's Discard, or deletes.
func (s *subStore) Discard(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	return Discard(ctx, s.inner, k)
}

// RemoveEmptyDir forwards to the inner store when it has directories.
func (s *subStore) RemoveEmptyDir(ctx context.Context, prefix string) error {
	in, ok := s.inner.(interface {
		RemoveEmptyDir(ctx context.Context, prefix string) error
	})
	if !ok {
		return nil
	}
	k, err := s.key(strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return err
	}
	return in.RemoveEmptyDir(ctx, k)
}
