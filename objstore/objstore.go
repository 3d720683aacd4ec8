package objstore

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/lance-context/lance-context/vfs"
)

// ErrExists is returned (wrapped) by PutIfAbsent when the key already exists.
// Callers test for it with errors.Is.
var ErrExists = errors.New("objstore: object already exists")

// ErrNotFound is returned (wrapped) by Get, GetRange, Head and Delete-less
// lookups when the key does not exist.
var ErrNotFound = errors.New("objstore: object not found")

// ErrInvalidRange is returned (wrapped) by GetRange when offset lies past the
// end of the object, or offset or length is negative.
var ErrInvalidRange = errors.New("objstore: invalid range")

// ErrInvalidKey is returned (wrapped) for a key or prefix that no backend may
// store: empty, absolute, with empty, "." or ".." segments, a trailing '/',
// a NUL byte, or a segment starting with ".tmp_" (reserved for temporary files).
var ErrInvalidKey = errors.New("objstore: invalid key")

// ErrNoSpace is wrapped by writes that failed because the storage is full
// (a local disk or quota: ENOSPC, EDQUOT). It is vfs.ErrNoSpace, so one
// errors.Is test covers the WAL's segment files and the object store.
var ErrNoSpace = vfs.ErrNoSpace

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string // full key, relative to the store root, '/'-separated
	Size    int64
	ModTime time.Time
}

// Store is the object store every durable component writes through. Keys are
// '/'-separated paths relative to the store's root; they never start with '/'.
//
// Implementations must make Put and PutIfAbsent durable before returning nil,
// and PutIfAbsent atomic: among concurrent callers (goroutines or processes)
// for one key exactly one succeeds, the others get ErrExists, and no reader
// ever sees a partially written object.
type Store interface {
	// Get returns the whole object.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns length bytes starting at offset. A range running past
	// the end of the object is truncated to it; offset past the end is an error.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Put writes the object, replacing any existing one.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes the object only if no object has that key; otherwise
	// it returns an error wrapping ErrExists and changes nothing.
	//
	// A call that returns some other error may or may not have written the
	// object (the acknowledgement can be lost). A caller that retries after
	// such an error and then gets ErrExists must read the object back to learn
	// whether its own earlier attempt won.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// List returns every object whose key starts with prefix, in ascending
	// lexical (byte) order of key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Head returns the object's metadata, or an error wrapping ErrNotFound.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Create starts a streaming write of the object. Nothing is visible under
	// key until the writer's Close returns nil; then the whole object appears
	// at once, durably, replacing any existing one (like Put). The writer uses
	// ctx for all of its I/O. Memory use is bounded (local disk streams to a
	// temporary file; S3 buffers one multipart part).
	Create(ctx context.Context, key string) (ObjectWriter, error)
}

// ObjectWriter streams one object into a Store. It is not safe for
// concurrent use. Call Close to commit or Abort to discard. Write or Close
// after Close or Abort returns an error. Abort may always be called (so
// `defer w.Abort()` is safe): after a successful Close it does nothing and
// returns nil; after a failed Close it releases whatever was left behind.
type ObjectWriter interface {
	io.Writer
	// Close commits the object: it appears atomically and durably, or Close
	// returns an error and the object is not written.
	Close() error
	// Abort discards everything written; the key is left untouched.
	Abort() error
}

// Reader is the read-only subset, for components that only read.
type Reader interface {
	Get(ctx context.Context, key string) ([]byte, error)
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	Head(ctx context.Context, key string) (ObjectInfo, error)
}

// RangeIntoReader is implemented by stores that can read a range into a
// caller's buffer (Local). It is optional: readers check for it and fall
// back to GetRange.
type RangeIntoReader interface {
	// GetRangeInto reads exactly len(dst) bytes at offset into dst; a range
	// past the end of the object is an error.
	GetRangeInto(ctx context.Context, key string, offset int64, dst []byte) error
}
