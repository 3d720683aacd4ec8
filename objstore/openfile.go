package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// FileOpener is a Store whose objects are local files that a reader may
// hold open across many range reads (Local, and Sub views of it). A held
// handle reads the object as it was when opened: use it only for objects
// that are never rewritten in place (Lance data and index files), where it
// saves the open, stat and close a GetRange costs per call. Wrappers that
// count or inject faults do not implement it, so their reads stay visible.
type FileOpener interface {
	OpenFile(ctx context.Context, key string) (*os.File, error)
}

// OpenFile implements FileOpener.
func (l *Local) OpenFile(ctx context.Context, key string) (*os.File, error) {
	f, _, err := l.open(ctx, key)
	return f, err
}

// OpenFile forwards to the inner store when it is a FileOpener, and fails
// with errors.ErrUnsupported otherwise (the caller then uses GetRange).
func (s *subStore) OpenFile(ctx context.Context, key string) (*os.File, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	in, ok := s.inner.(FileOpener)
	if !ok {
		return nil, fmt.Errorf("objstore: %T cannot hold files open: %w", s.inner, errors.ErrUnsupported)
	}
	return in.OpenFile(ctx, k)
}

// OpenFile forwards to the inner store (see subStore.OpenFile): a held
// file is read with pread, which needs no cache of small objects.
func (s *SmallFiles) OpenFile(ctx context.Context, key string) (*os.File, error) {
	in, ok := s.inner.(FileOpener)
	if !ok {
		return nil, fmt.Errorf("objstore: %T cannot hold files open: %w", s.inner, errors.ErrUnsupported)
	}
	return in.OpenFile(ctx, key)
}
