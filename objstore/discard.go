package objstore

import "context"

// Discarder is implemented by stores whose Delete makes the deletion
// durable at a cost (Local syncs the directory) and that can delete without
// it.
type Discarder interface {
	// Discard deletes key; the deletion becomes durable with the
	// directory's next sync, and a crash before that may bring the object
	// back.
	Discard(ctx context.Context, key string) error
}

// Discard deletes garbage: an object whose return after a crash is
// harmless (a collector will find it again). It uses s's Discard when it
// has one, else Delete.
func Discard(ctx context.Context, s Store, key string) error {
	if d, ok := s.(Discarder); ok {
		return d.Discard(ctx, key)
	}
	return s.Delete(ctx, key)
}

// Discard implements Discarder: Delete without the directory sync.
func (l *Local) Discard(ctx context.Context, key string) error {
	return l.remove(ctx, key, false)
}
