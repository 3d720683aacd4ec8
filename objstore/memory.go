package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is an in-process Store backed by a map. It copies data on every put
// and get, so callers may reuse their buffers. The zero value is not usable;
// call NewMemory.
type Memory struct {
	mu   sync.RWMutex
	objs map[string]memObject
}

type memObject struct {
	data    []byte
	modTime time.Time
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{objs: make(map[string]memObject)}
}

var _ Store = (*Memory)(nil)

func (m *Memory) lookup(ctx context.Context, key string) (memObject, error) {
	if err := ctx.Err(); err != nil {
		return memObject{}, err
	}
	if err := ValidateKey(key); err != nil {
		return memObject{}, err
	}
	m.mu.RLock()
	o, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return memObject{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return o, nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := m.lookup(ctx, key)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(o.data), nil
}

// GetRange implements Store.
func (m *Memory) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	o, err := m.lookup(ctx, key)
	if err != nil {
		return nil, err
	}
	end, err := CheckRange(key, int64(len(o.data)), offset, length)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(o.data[offset:end]), nil
}

// Head implements Store.
func (m *Memory) Head(ctx context.Context, key string) (ObjectInfo, error) {
	o, err := m.lookup(ctx, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

func (m *Memory) put(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	o := memObject{data: bytes.Clone(data), modTime: time.Now()}
	if o.data == nil {
		o.data = []byte{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok && ifAbsent {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	m.objs[key] = o
	return nil
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, data []byte) error {
	return m.put(ctx, key, data, false)
}

// PutIfAbsent implements Store.
func (m *Memory) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return m.put(ctx, key, data, true)
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	var out []ObjectInfo
	m.mu.RLock()
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

// Create implements Store. The object is buffered in memory until Close.
func (m *Memory) Create(ctx context.Context, key string) (ObjectWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return &memWriter{m: m, ctx: ctx, key: key}, nil
}

var errWriterDone = errors.New("objstore: writer already closed or aborted")

type memWriter struct {
	m    *Memory
	ctx  context.Context
	key  string
	buf  bytes.Buffer
	done bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriterDone
	}
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

func (w *memWriter) Close() error {
	if w.done {
		return errWriterDone
	}
	w.done = true
	return w.m.put(w.ctx, w.key, w.buf.Bytes(), false)
}

func (w *memWriter) Abort() error {
	w.done = true
	w.buf = bytes.Buffer{}
	return nil
}
