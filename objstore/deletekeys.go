package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/internal/multierr"
	"github.com/lance-context/lance-context/objstore/internal/sleep"
)

// BatchDeleter is implemented by stores that delete many keys for less
// than one request each: S3's DeleteObjects (1000 keys a request), an
// Azure blob batch (256), local disk (one sync of each directory instead
// of one a key). It is optional: DeleteKeys falls back to Delete.
type BatchDeleter interface {
	// DeleteMany deletes keys, in any order, as Delete deletes each: a
	// missing key is not an error, and a deletion it reports is durable.
	// On failure the error wraps a *DeleteError naming the keys that may
	// remain; the others are deleted.
	DeleteMany(ctx context.Context, keys []string) error
}

// BatchDiscarder is to Discarder what BatchDeleter is to Delete: many
// keys of garbage deleted without the cost of making each deletion
// durable (local disk: no directory sync).
type BatchDiscarder interface {
	DiscardMany(ctx context.Context, keys []string) error
}

// DeleteError reports the keys a DeleteMany, DeleteKeys or DiscardKeys
// may have left behind: their deletes failed or were never sent. The
// other keys were deleted.
type DeleteError struct {
	Keys []string // in the order they were given
	Err  error    // why (a multierr.Join of the distinct failures)
}

func (e *DeleteError) Error() string {
	if len(e.Keys) == 1 {
		return fmt.Sprintf("objstore: delete %s: %v", e.Keys[0], e.Err)
	}
	return fmt.Sprintf("objstore: %d keys not deleted (%s, ...): %v", len(e.Keys), e.Keys[0], e.Err)
}

func (e *DeleteError) Unwrap() error { return e.Err }

// NotDeleted returns the keys that a batch delete of keys that returned
// err may have left: none when err is nil, those a *DeleteError in err
// names, else (an error that names none) all of them.
func NotDeleted(err error, keys []string) []string {
	if err == nil {
		return nil
	}
	var de *DeleteError
	if errors.As(err, &de) {
		return de.Keys
	}
	return keys
}

// DeleteParallel is how many single deletes DeleteKeys (and a driver
// without a batch request) runs at once.
const DeleteParallel = 16

// DeleteKeys deletes keys with s's DeleteMany where s has one, else with
// Delete, DeleteParallel at a time. Deleting a missing key is not an
// error; on failure the error wraps a *DeleteError (see NotDeleted).
func DeleteKeys(ctx context.Context, s Store, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if b, ok := s.(BatchDeleter); ok {
		return b.DeleteMany(ctx, keys)
	}
	return EachKey(ctx, keys, DeleteParallel, s.Delete)
}

// DiscardKeys deletes garbage (see Discard) with s's DiscardMany, else
// its Discard, else DeleteKeys.
func DiscardKeys(ctx context.Context, s Store, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if b, ok := s.(BatchDiscarder); ok {
		return b.DiscardMany(ctx, keys)
	}
	if d, ok := s.(Discarder); ok {
		return EachKey(ctx, keys, DeleteParallel, d.Discard)
	}
	return DeleteKeys(ctx, s, keys)
}

// EachKey calls del for every key, at most parallel at once, and gathers
// the failures into a *DeleteError. Keys not yet started when ctx ends
// fail with its error.
func EachKey(ctx context.Context, keys []string, parallel int, del func(ctx context.Context, key string) error) error {
	errs := make([]error, len(keys))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, k := range keys {
		if errs[i] = ctx.Err(); errs[i] != nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = del(ctx, k)
		})
	}
	wg.Wait()
	return KeyErrors(keys, errs)
}

// KeyErrors returns a *DeleteError for the keys whose errs[i] is not nil,
// or nil when none is.
func KeyErrors(keys []string, errs []error) error {
	var de DeleteError
	var failed []error
	for i, err := range errs {
		if err != nil {
			de.Keys = append(de.Keys, keys[i])
			failed = append(failed, err)
		}
	}
	if len(de.Keys) == 0 {
		return nil
	}
	de.Err = multierr.Join(failed...)
	return &de
}

// mapDeleteError turns the keys a *DeleteError of an inner store names
// back into the caller's (a wrapper's view of them); other errors pass.
func mapDeleteError(err error, back func(string) string) error {
	var de *DeleteError
	if !errors.As(err, &de) {
		return err
	}
	keys := make([]string, len(de.Keys))
	for i, k := range de.Keys {
		keys[i] = back(k)
	}
	return &DeleteError{Keys: keys, Err: de.Err}
}

// DeleteMany implements BatchDeleter: every file is unlinked, then each
// directory that lost one is synced once.
func (l *Local) DeleteMany(ctx context.Context, keys []string) error {
	return l.removeMany(ctx, keys, true)
}

// DiscardMany implements BatchDiscarder: unlinks without a sync.
func (l *Local) DiscardMany(ctx context.Context, keys []string) error {
	return l.removeMany(ctx, keys, false)
}

func (l *Local) removeMany(ctx context.Context, keys []string, durable bool) error {
	errs := make([]error, len(keys))
	dirs := map[string][]int{} // directory -> the keys removed from it
	for i, k := range keys {
		var dir string
		if dir, errs[i] = l.unlink(ctx, k); dir != "" && durable {
			dirs[dir] = append(dirs[dir], i)
		}
	}
	for dir, idx := range dirs {
		if err := SyncDir(dir); err != nil {
			for _, i := range idx {
				errs[i] = fmt.Errorf("objstore: local delete %s: %w", keys[i], err)
			}
		}
	}
	return KeyErrors(keys, errs)
}

// DeleteMany implements BatchDeleter under one lock.
func (m *Memory) DeleteMany(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return &DeleteError{Keys: keys, Err: err}
	}
	errs := make([]error, len(keys))
	m.mu.Lock()
	for i, k := range keys {
		if errs[i] = ValidateKey(k); errs[i] == nil {
			delete(m.objs, k)
		}
	}
	m.mu.Unlock()
	return KeyErrors(keys, errs)
}

// DeleteMany implements BatchDeleter through the inner store's.
func (s *subStore) DeleteMany(ctx context.Context, keys []string) error {
	return s.many(ctx, keys, DeleteKeys)
}

// DiscardMany implements BatchDiscarder through the inner store's.
func (s *subStore) DiscardMany(ctx context.Context, keys []string) error {
	return s.many(ctx, keys, DiscardKeys)
}

func (s *subStore) many(ctx context.Context, keys []string, fn func(context.Context, Store, []string) error) error {
	errs := make([]error, len(keys))
	inner := make([]string, 0, len(keys))
	for i, k := range keys {
		var ik string
		if ik, errs[i] = s.key(k); errs[i] == nil {
			inner = append(inner, ik)
		}
	}
	err := mapDeleteError(fn(ctx, s.inner, inner), func(k string) string { return strings.TrimPrefix(k, s.prefix) })
	return joinDeleteErrors(KeyErrors(keys, errs), err, keys)
}

// joinDeleteErrors merges the failures of keys a wrapper refused itself
// (invalid) with those of the inner call.
func joinDeleteErrors(own, inner error, keys []string) error {
	if own == nil {
		return inner
	}
	if inner == nil {
		return own
	}
	a, b := own.(*DeleteError), NotDeleted(inner, keys)
	return &DeleteError{Keys: append(a.Keys, b...), Err: multierr.Join(a.Err, inner)}
}

// countedBatch is how many keys Counting counts as one request of a
// DeleteMany: S3's bound per DeleteObjects request.
const countedBatch = 1000

// DeleteMany implements BatchDeleter, counted as one OpDeleteMany per
// 1000 keys (S3's requests; Azure's batches hold 256, and a store without
// batches sends one request a key), one after another.
func (c *Counting) DeleteMany(ctx context.Context, keys []string) error {
	return c.many(ctx, keys, DeleteKeys)
}

// DiscardMany implements BatchDiscarder, counted as DeleteMany.
func (c *Counting) DiscardMany(ctx context.Context, keys []string) error {
	return c.many(ctx, keys, DiscardKeys)
}

func (c *Counting) many(ctx context.Context, keys []string, fn func(context.Context, Store, []string) error) error {
	var errs []error
	for len(keys) > 0 {
		n := min(len(keys), countedBatch)
		d := c.start(OpDeleteMany, 0)
		err := c.wait(ctx)
		if err == nil {
			err = fn(ctx, c.inner, keys[:n])
		} else {
			err = &DeleteError{Keys: keys[:n], Err: err}
		}
		c.finish(d, 0)
		errs = append(errs, err)
		keys = keys[n:]
	}
	return joinAll(errs)
}

// joinAll merges the results of batches of one DeleteMany.
func joinAll(errs []error) error {
	var out *DeleteError
	for _, err := range errs {
		if err == nil {
			continue
		}
		var de *DeleteError
		if !errors.As(err, &de) {
			return err // names no keys: all may remain
		}
		if out == nil {
			out = &DeleteError{}
		}
		out.Keys = append(out.Keys, de.Keys...)
		out.Err = multierr.Join(out.Err, de.Err)
	}
	if out == nil {
		return nil
	}
	return out
}

// DeleteMany implements BatchDeleter. Faults are drawn for each key as
// for its Delete (OpDelete, so FailKey(OpDelete, ...) fails the keys it
// matches); the keys not failed outright go to the inner store in one
// DeleteKeys, and a lost acknowledgement fails a key that was deleted.
// The latency is one request's.
func (f *Faulty) DeleteMany(ctx context.Context, keys []string) error {
	return f.many(ctx, keys, DeleteKeys)
}

// DiscardMany implements BatchDiscarder, with DeleteMany's faults.
func (f *Faulty) DiscardMany(ctx context.Context, keys []string) error {
	return f.many(ctx, keys, DiscardKeys)
}

func (f *Faulty) many(ctx context.Context, keys []string, fn func(context.Context, Store, []string) error) error {
	errs := make([]error, len(keys))
	var send []string
	var lat time.Duration
	for i, k := range keys {
		fault, call, l := f.decide(OpDelete, k)
		lat = max(lat, l)
		switch fault {
		case FaultError:
			errs[i] = &InjectedError{Op: OpDelete, Key: k, Call: call}
		case FaultLostAck:
			errs[i] = &InjectedError{Op: OpDelete, Key: k, Call: call, LostAck: true}
			send = append(send, k)
		default:
			send = append(send, k)
		}
	}
	if lat > 0 {
		if err := sleep.Ctx(ctx, lat); err != nil {
			return &DeleteError{Keys: keys, Err: err}
		}
	}
	failed := map[string]error{}
	if err := fn(ctx, f.inner, send); err != nil {
		for _, k := range NotDeleted(err, send) {
			failed[k] = err
		}
	}
	for i, k := range keys {
		if err, ok := failed[k]; ok {
			errs[i] = err // the inner failure, over a lost ack
		}
	}
	return KeyErrors(keys, errs)
}

// DeleteMany implements BatchDeleter; the keys' cache entries go first.
func (s *SmallFiles) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		s.drop(k)
	}
	return DeleteKeys(ctx, s.inner, keys)
}

// DiscardMany implements BatchDiscarder; the keys' cache entries go first.
func (s *SmallFiles) DiscardMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		s.drop(k)
	}
	return DiscardKeys(ctx, s.inner, keys)
}

var (
	_ BatchDeleter   = (*Local)(nil)
	_ BatchDiscarder = (*Local)(nil)
	_ BatchDeleter   = (*Memory)(nil)
	_ BatchDeleter   = (*subStore)(nil)
	_ BatchDiscarder = (*subStore)(nil)
	_ BatchDeleter   = (*Counting)(nil)
	_ BatchDiscarder = (*Counting)(nil)
	_ BatchDeleter   = (*Faulty)(nil)
	_ BatchDiscarder = (*Faulty)(nil)
	_ BatchDeleter   = (*SmallFiles)(nil)
	_ BatchDiscarder = (*SmallFiles)(nil)
)
