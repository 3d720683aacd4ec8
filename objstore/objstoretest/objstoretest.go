// Package objstoretest is the conformance suite every objstore.Store backend
// must pass. Backends run it from their tests:
//
//	objstoretest.Run(t, func(t *testing.T) objstore.Store { return newStore(t) })
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// Options adjust the suite for one backend.
type Options struct {
	// SkipRace skips the concurrent PutIfAbsent race, for a backend that
	// does not enforce create-only writes (say why at the call site).
	SkipRace bool
	// LargeSize is the object size of the large streaming-write subtests,
	// which should exceed one multipart part on S3. 0: 9 MiB.
	LargeSize int
	// Requests, when set, returns the number of requests the backend has
	// sent so far (an http.RoundTripper that counts, for a cloud backend):
	// the suite then checks the requests that ListFirst and GetTail cost.
	Requests func() int64
	// TailRequests is what GetTail costs with Requests set: 0 means one
	// (a store with a one-request tail read); a backend without suffix
	// ranges (Azure) says 2, a Head and a ranged read.
	TailRequests int
	// DeleteBatch is how many keys one request of objstore.DeleteKeys
	// deletes on the backend (S3: 1000; Azure: 256; 1: a request a key),
	// checked with Requests set; 0: not checked.
	DeleteBatch int
}

// Run runs the suite. newStore must return an empty store, isolated from
// those of other calls, for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	RunWith(t, newStore, Options{})
}

// RunWith runs the suite with options.
func RunWith(t *testing.T, newStore func(t *testing.T) objstore.Store, opts Options) {
	if opts.LargeSize == 0 {
		opts.LargeSize = 9 << 20
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"PutIfAbsent", testPutIfAbsent},
		{"GetRange", testGetRange},
		{"Head", testHead},
		{"NotFound", testNotFound},
		{"DeleteIdempotent", testDelete},
		{"DeleteKeys", func(t *testing.T, s objstore.Store) { testDeleteKeys(t, s, opts) }},
		{"ListOrder", testListOrder},
		{"ListPrefix", testListPrefix},
		{"ListFirst", func(t *testing.T, s objstore.Store) { testListFirst(t, s, opts) }},
		{"GetTail", func(t *testing.T, s objstore.Store) { testGetTail(t, s, opts) }},
		{"ListKeys", testListKeys},
		{"InvalidKeys", testInvalidKeys},
		{"CreateVisibility", testCreateVisibility},
		{"CreateAbort", testCreateAbort},
		{"CreateLarge", func(t *testing.T, s objstore.Store) { testCreateLarge(t, s, opts.LargeSize) }},
		{"CreateLargeAbort", func(t *testing.T, s objstore.Store) { testCreateLargeAbort(t, s, opts.LargeSize) }},
		{"Sub", testSub},
		{"ContextCanceled", testContextCanceled},
		{"PutIfAbsentRace", func(t *testing.T, s objstore.Store) {
			if opts.SkipRace {
				t.Skip("backend does not enforce create-only writes")
			}
			testRace(t, s)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s objstore.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %q, want %q", key, trunc(got), trunc(want))
	}
}

func mustAbsent(t *testing.T, s objstore.Store, key string) {
	t.Helper()
	if _, err := s.Head(ctxT(t), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head(%q) err = %v, want ErrNotFound", key, err)
	}
}

func keys(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(ctxT(t), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	out := []string{}
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}

// pattern returns n deterministic bytes distinct for each seed.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	for _, c := range []struct {
		key  string
		data []byte
	}{
		{"a", []byte("hello")},
		{"dir/sub/obj.bin", pattern(100_000, 1)},
		{"empty", []byte{}},
		{"_versions/1.manifest", []byte("m")},
		{"with space/and-üñí", []byte("x")},
	} {
		mustPut(t, s, c.key, c.data)
		mustGet(t, s, c.key, c.data)
	}
	// The store must not alias the caller's buffer.
	buf := []byte("original")
	mustPut(t, s, "alias", buf)
	copy(buf, "XXXXXXXX")
	mustGet(t, s, "alias", []byte("original"))
}

func testOverwrite(t *testing.T, s objstore.Store) {
	mustPut(t, s, "k", []byte("first version, longer"))
	mustPut(t, s, "k", []byte("second"))
	mustGet(t, s, "k", []byte("second"))
	if got := keys(t, s, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List after overwrite = %q, want [k]", got)
	}
}

func testPutIfAbsent(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	if err := s.PutIfAbsent(ctx, "x/once", []byte("first")); err != nil {
		t.Fatalf("first PutIfAbsent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "x/once", []byte("second"))
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent err = %v, want ErrExists", err)
	}
	mustGet(t, s, "x/once", []byte("first"))
	// Put-created objects count too.
	mustPut(t, s, "x/put", []byte("p"))
	if err := s.PutIfAbsent(ctx, "x/put", []byte("q")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent over Put err = %v, want ErrExists", err)
	}
	mustGet(t, s, "x/put", []byte("p"))
	// After a delete the key is free again.
	if err := s.Delete(ctx, "x/once"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "x/once", []byte("third")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	mustGet(t, s, "x/once", []byte("third"))
}

func testGetRange(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	data := pattern(1000, 2)
	mustPut(t, s, "r", data)
	for _, c := range []struct {
		off, n int64
		want   []byte
	}{
		{0, 10, data[:10]},
		{100, 200, data[100:300]},
		{990, 10, data[990:]},
		{990, 100, data[990:]}, // truncated at the end
		{0, 1 << 40, data},
		{999, 1, data[999:]},
		{1000, 10, []byte{}}, // at the end: empty
		{500, 0, []byte{}},
	} {
		got, err := s.GetRange(ctx, "r", c.off, c.n)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Fatalf("GetRange(%d, %d) = %d bytes, want %d", c.off, c.n, len(got), len(c.want))
		}
	}
	for _, c := range [][2]int64{{1001, 1}, {5000, 10}, {-1, 5}, {0, -1}} {
		if _, err := s.GetRange(ctx, "r", c[0], c[1]); !errors.Is(err, objstore.ErrInvalidRange) {
			t.Fatalf("GetRange(%d, %d) err = %v, want ErrInvalidRange", c[0], c[1], err)
		}
	}
	if _, err := s.GetRange(ctx, "missing", 0, 1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("GetRange(missing) err = %v, want ErrNotFound", err)
	}
	mustPut(t, s, "empty", nil)
	if got, err := s.GetRange(ctx, "empty", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("GetRange(empty, 0, 10) = %q, %v; want empty, nil", got, err)
	}
}

func testHead(t *testing.T, s objstore.Store) {
	before := time.Now().Add(-time.Hour)
	mustPut(t, s, "h/obj", pattern(12345, 3))
	info, err := s.Head(ctxT(t), "h/obj")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "h/obj" || info.Size != 12345 {
		t.Fatalf("Head = %+v, want key h/obj size 12345", info)
	}
	if info.ModTime.Before(before) {
		t.Fatalf("Head ModTime %v is implausible", info.ModTime)
	}
	mustAbsent(t, s, "h") // a "directory" is not an object
}

func testNotFound(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "present/x", []byte("x"))
	for _, k := range []string{"missing", "present/missing", "present", "present/x/below"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Get(%q) err = %v, want ErrNotFound", k, err)
		}
		if _, err := s.Head(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Head(%q) err = %v, want ErrNotFound", k, err)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "d/k", []byte("v"))
	for range 2 {
		if err := s.Delete(ctx, "d/k"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		mustAbsent(t, s, "d/k")
	}
	if err := s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete(missing): %v", err)
	}
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List after deletes = %q, want none", got)
	}
}

// testDeleteKeys: DeleteKeys deletes every key given, missing ones and
// repeats included, in the requests the backend's batches allow; an
// invalid key fails alone and is the one key its error names.
func testDeleteKeys(t *testing.T, s objstore.Store, opts Options) {
	ctx := ctxT(t)
	var ks []string
	for i := range 7 {
		k := fmt.Sprintf("dk/%d/obj-%d", i%2, i)
		mustPut(t, s, k, []byte(k))
		ks = append(ks, k)
	}
	mustPut(t, s, "kept", []byte("x"))
	var before int64
	if opts.Requests != nil {
		before = opts.Requests()
	}
	if err := objstore.DeleteKeys(ctx, s, append(ks[1:], "dk/never/existed")); err != nil {
		t.Fatalf("DeleteKeys: %v", err)
	}
	if opts.Requests != nil && opts.DeleteBatch > 0 {
		want := int64((len(ks) + opts.DeleteBatch - 1) / opts.DeleteBatch)
		if got := opts.Requests() - before; got != want {
			t.Errorf("DeleteKeys of %d keys took %d requests, want %d", len(ks), got, want)
		}
	}
	if err := objstore.DeleteKeys(ctx, s, []string{ks[0], ks[0]}); err != nil {
		t.Fatalf("DeleteKeys of a key given twice: %v", err)
	}
	for _, k := range ks {
		mustAbsent(t, s, k)
	}
	if got := keys(t, s, ""); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("List after DeleteKeys = %q, want [kept]", got)
	}
	mustPut(t, s, "dk/a", []byte("a"))
	err := objstore.DeleteKeys(ctx, s, []string{"dk/a", "../bad", "kept"})
	if !errors.Is(err, objstore.ErrInvalidKey) {
		t.Fatalf("DeleteKeys with an invalid key: err = %v, want ErrInvalidKey", err)
	}
	if left := objstore.NotDeleted(err, nil); !slices.Equal(left, []string{"../bad"}) {
		t.Fatalf("NotDeleted = %q, want [../bad] (%v)", left, err)
	}
	mustAbsent(t, s, "dk/a")
	mustAbsent(t, s, "kept")
	if err := objstore.DeleteKeys(ctx, s, nil); err != nil {
		t.Fatalf("DeleteKeys(nil): %v", err)
	}
}

var listKeys = []string{"b", "a/c/e", "a0", "a-b", "ab", "a/b", "a/c/d", "a/c0", "c/x/y/z"}

func testListOrder(t *testing.T, s objstore.Store) {
	for i, k := range listKeys {
		mustPut(t, s, k, pattern(i, i))
	}
	want := slices.Clone(listKeys)
	slices.Sort(want) // byte order: "a-b" < "a/b" < "a0" ('-' < '/' < '0')
	if got := keys(t, s, ""); !slices.Equal(got, want) {
		t.Fatalf("List(\"\") = %q, want %q", got, want)
	}
	infos, err := s.List(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if n := int64(slices.Index(listKeys, in.Key)); in.Size != n {
			t.Fatalf("List size of %q = %d, want %d", in.Key, in.Size, n)
		}
	}
}

func testListPrefix(t *testing.T, s objstore.Store) {
	for _, k := range listKeys {
		mustPut(t, s, k, []byte(k))
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/b", "a/c/d", "a/c/e", "a/c0"}},
		{"a/c", []string{"a/c/d", "a/c/e", "a/c0"}},
		{"a/c/", []string{"a/c/d", "a/c/e"}},
		{"a/c/d", []string{"a/c/d"}},
		{"a", []string{"a-b", "a/b", "a/c/d", "a/c/e", "a/c0", "a0", "ab"}},
		{"a-", []string{"a-b"}},
		{"b", []string{"b"}},
		{"c/x/", []string{"c/x/y/z"}},
		{"c/x/y/z", []string{"c/x/y/z"}},
		{"zz", []string{}},
		{"a/zz/", []string{}},
		{"c/x/y/z/", []string{}},
	} {
		if got := keys(t, s, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	for _, k := range []string{"", "/abs", "a/../b", "..", "a/./b", "a//b", "trailing/", ".tmp_x", "d/.tmp_y"} {
		if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) err = %v, want ErrInvalidKey", k, err)
		}
		if err := s.PutIfAbsent(ctx, k, []byte("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q) err = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get(%q) err = %v, want ErrInvalidKey", k, err)
		}
	}
	if _, err := s.List(ctx, "../"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("List(\"../\") err = %v, want ErrInvalidKey", err)
	}
}

func testCreateVisibility(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	w, err := s.Create(ctx, "data/file.lance")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	want := pattern(300_000, 4)
	for chunk := range slices.Chunk(want, 7777) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	mustAbsent(t, s, "data/file.lance")
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List before Close = %q, want none", got)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustGet(t, s, "data/file.lance", want)
	if got := keys(t, s, ""); !slices.Equal(got, []string{"data/file.lance"}) {
		t.Fatalf("List after Close = %q", got)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort after Close: %v", err)
	}
	mustGet(t, s, "data/file.lance", want) // Abort after Close keeps the object

	// Create replaces an existing object, atomically at Close.
	w2, err := s.Create(ctx, "data/file.lance")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w2, "new")
	mustGet(t, s, "data/file.lance", want)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "data/file.lance", []byte("new"))

	// An empty object.
	w3, err := s.Create(ctx, "data/empty")
	if err != nil {
		t.Fatal(err)
	}
	if err := w3.Close(); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "data/empty", []byte{})
}

func testCreateAbort(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	w, err := s.Create(ctx, "ab/x")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(pattern(1000, 5))
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after Abort succeeded")
	}
	mustAbsent(t, s, "ab/x")
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List after Abort = %q, want none", got)
	}
	// Abort leaves an existing object alone.
	mustPut(t, s, "ab/y", []byte("keep"))
	w, err = s.Create(ctx, "ab/y")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("discard"))
	w.Abort()
	mustGet(t, s, "ab/y", []byte("keep"))
}

func testCreateLarge(t *testing.T, s objstore.Store, size int) {
	ctx := ctxT(t)
	want := pattern(size, 6)
	w, err := s.Create(ctx, "big/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	// Odd-sized writes, one larger than a part.
	rest := want
	for i := 0; len(rest) > 0; i++ {
		n := min(len(rest), []int{1 << 20, 3, 6<<20 + 17, 12345}[i%4])
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		rest = rest[n:]
	}
	mustAbsent(t, s, "big/obj")
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustGet(t, s, "big/obj", want)
	got, err := s.GetRange(ctx, "big/obj", int64(size)-100, 1000)
	if err != nil || !bytes.Equal(got, want[size-100:]) {
		t.Fatalf("GetRange tail: %d bytes, %v", len(got), err)
	}
}

func testCreateLargeAbort(t *testing.T, s objstore.Store, size int) {
	ctx := ctxT(t)
	w, err := s.Create(ctx, "big/aborted")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pattern(size, 7)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	mustAbsent(t, s, "big/aborted")
}

func testSub(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	sub := objstore.Sub(s, "tables/t1.rollout.lance")
	mustPut(t, sub, "data/x", []byte("x"))
	mustGet(t, s, "tables/t1.rollout.lance/data/x", []byte("x"))
	mustPut(t, s, "tables/t1.rollout.lancex", []byte("sibling"))
	mustPut(t, s, "tables/t1.rollout.lance/_versions/1.manifest", []byte("m"))
	if got, want := keys(t, sub, ""), []string{"_versions/1.manifest", "data/x"}; !slices.Equal(got, want) {
		t.Fatalf("sub List = %q, want %q", got, want)
	}
	if got := keys(t, sub, "data/"); !slices.Equal(got, []string{"data/x"}) {
		t.Fatalf("sub List(data/) = %q", got)
	}
	if err := sub.PutIfAbsent(ctx, "data/x", []byte("y")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("sub PutIfAbsent err = %v", err)
	}
	info, err := sub.Head(ctx, "data/x")
	if err != nil || info.Key != "data/x" || info.Size != 1 {
		t.Fatalf("sub Head = %+v, %v", info, err)
	}
	if got, err := sub.GetRange(ctx, "_versions/1.manifest", 0, 1); err != nil || string(got) != "m" {
		t.Fatalf("sub GetRange = %q, %v", got, err)
	}
	w, err := sub.Create(ctx, "data/w")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "streamed")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "tables/t1.rollout.lance/data/w", []byte("streamed"))

	nested := objstore.Sub(objstore.Sub(s, "tables/"), "/t1.rollout.lance/data")
	if got := keys(t, nested, ""); !slices.Equal(got, []string{"w", "x"}) {
		t.Fatalf("nested sub List = %q", got)
	}
	if err := nested.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	mustAbsent(t, s, "tables/t1.rollout.lance/data/x")
	if _, err := sub.Get(ctx, "../escape"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Fatalf("sub Get(../escape) err = %v, want ErrInvalidKey", err)
	}
	if objstore.Sub(s, "") != s {
		t.Fatal("Sub(s, \"\") is not s")
	}
}

func testContextCanceled(t *testing.T, s objstore.Store) {
	mustPut(t, s, "cc/existing", []byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ops := map[string]func() error{
		"Get":         func() error { _, err := s.Get(ctx, "cc/existing"); return err },
		"GetRange":    func() error { _, err := s.GetRange(ctx, "cc/existing", 0, 1); return err },
		"Head":        func() error { _, err := s.Head(ctx, "cc/existing"); return err },
		"List":        func() error { _, err := s.List(ctx, "cc/"); return err },
		"Put":         func() error { return s.Put(ctx, "cc/put", []byte("x")) },
		"PutIfAbsent": func() error { return s.PutIfAbsent(ctx, "cc/pia", []byte("x")) },
		"Delete":      func() error { return s.Delete(ctx, "cc/existing") },
		"Create": func() error {
			w, err := s.Create(ctx, "cc/create")
			if err != nil {
				return err
			}
			w.Write([]byte("x"))
			err = w.Close()
			w.Abort()
			return err
		},
	}
	for name, op := range ops {
		start := time.Now()
		err := op()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: err = %v, want context.Canceled", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s with a canceled context took %v", name, d)
		}
	}
	for _, k := range []string{"cc/put", "cc/pia", "cc/create"} {
		mustAbsent(t, s, k)
	}
	mustGet(t, s, "cc/existing", []byte("x"))
}

func testRace(t *testing.T, s objstore.Store) {
	const n = 32
	ctx := ctxT(t)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = s.PutIfAbsent(ctx, "race/key", []byte(fmt.Sprintf("writer %d", i)))
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won", winner, i)
			}
			winner = i
		case !errors.Is(err, objstore.ErrExists):
			t.Fatalf("writer %d: err = %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	mustGet(t, s, "race/key", []byte(fmt.Sprintf("writer %d", winner)))
	if got := keys(t, s, ""); !slices.Equal(got, []string{"race/key"}) {
		t.Fatalf("List after race = %q", got)
	}
}

// listFirstKeys is the number of keys under the ListFirst subtest's prefix:
// more than S3's and GCS's 1000 keys a page.
const listFirstKeys = 1005

// putAll writes every key (its name as content), a few at a time.
func putAll(t *testing.T, s objstore.Store, keys []string) {
	t.Helper()
	ctx := ctxT(t)
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(keys))
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.Put(ctx, k, []byte(k)); err != nil {
				errs <- fmt.Errorf("Put(%q): %w", k, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// testListFirst: ListFirst returns exactly the first n keys in byte order
// under a prefix holding more than n (and more than a page of 1000), with
// their sizes; with a request counter, one request for n up to a page.
func testListFirst(t *testing.T, s objstore.Store, opts Options) {
	ctx := ctxT(t)
	var want []string
	for i := range listFirstKeys {
		// Written in an order unlike byte order; names of unequal length.
		want = append(want, fmt.Sprintf("v/%d", (i*7919)%listFirstKeys))
	}
	want = append(want, "v/0-nested/x") // a "directory" among the first names
	// Neighbours of the prefix on both sides.
	putAll(t, s, append(slices.Clone(want), "u/1", "v0", "w/1"))
	slices.Sort(want)

	for _, n := range []int{1, 3, 1000, 1001, len(want), len(want) + 5} {
		infos, err := objstore.ListFirst(ctx, s, "v/", n)
		if err != nil {
			t.Fatalf("ListFirst(v/, %d): %v", n, err)
		}
		got := make([]string, len(infos))
		for i, in := range infos {
			got[i] = in.Key
			if in.Size != int64(len(in.Key)) {
				t.Fatalf("ListFirst(v/, %d): %s has size %d, want %d", n, in.Key, in.Size, len(in.Key))
			}
		}
		if w := want[:min(n, len(want))]; !slices.Equal(got, w) {
			t.Fatalf("ListFirst(v/, %d) = %d keys %v..., want %d keys %v...", n, len(got), got[:min(len(got), 5)], len(w), w[:min(len(w), 5)])
		}
	}
	if infos, err := objstore.ListFirst(ctx, s, "v", 2); err != nil || len(infos) != 2 || infos[0].Key != want[0] || infos[1].Key != want[1] {
		t.Fatalf("ListFirst(v, 2) = %v, %v; want %v", infos, err, want[:2])
	}
	if infos, err := objstore.ListFirst(ctx, s, "none/", 3); err != nil || len(infos) != 0 {
		t.Fatalf("ListFirst(none/, 3) = %v, %v; want nothing", infos, err)
	}
	if opts.Requests != nil {
		for _, n := range []int{1, 3, 1000} {
			before := opts.Requests()
			if _, err := objstore.ListFirst(ctx, s, "v/", n); err != nil {
				t.Fatal(err)
			}
			if k := opts.Requests() - before; k != 1 {
				t.Errorf("ListFirst(v/, %d) over %d keys took %d requests, want 1", n, len(want), k)
			}
		}
	}
}

// testListKeys: ListKeys returns List's keys, in byte order, under a
// directory prefix, a partial name, a prefix with subdirectories and an
// empty one; with infos, List's infos.
func testListKeys(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	putAll(t, s, []string{"m/2", "m/10", "m/1", "m/sub/a", "m/sub/b/c", "m1", "n/1", "flat/x", "flat/y"})
	for _, prefix := range []string{"m/", "m", "flat/", "m/sub/", "f", "none/", ""} {
		keys, infos, err := objstore.ListKeys(ctx, s, prefix)
		if err != nil {
			t.Fatalf("ListKeys(%q): %v", prefix, err)
		}
		listed, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]string, len(listed))
		for i, o := range listed {
			want[i] = o.Key
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("ListKeys(%q) = %q, want List's %q", prefix, keys, want)
		}
		if infos != nil && !slices.EqualFunc(infos, listed, func(a, b objstore.ObjectInfo) bool { return a.Key == b.Key && a.Size == b.Size }) {
			t.Fatalf("ListKeys(%q) infos = %v, want List's %v", prefix, infos, listed)
		}
	}
	// Through a sub-store, keys are its own.
	if keys, _, err := objstore.ListKeys(ctx, objstore.Sub(s, "m/"), "sub/"); err != nil || !slices.Equal(keys, []string{"sub/a", "sub/b/c"}) {
		t.Fatalf("ListKeys(sub/) in m/ = %q, %v; want [sub/a sub/b/c]", keys, err)
	}
}

// testGetTail: GetTail returns the last min(n, size) bytes and the whole
// object's size; with a request counter, in TailRequests requests.
func testGetTail(t *testing.T, s objstore.Store, opts Options) {
	ctx := ctxT(t)
	data := pattern(100_000, 7)
	mustPut(t, s, "f", data)
	mustPut(t, s, "empty", []byte{})
	for _, n := range []int64{0, 1, 40, 65536, 99_999, 100_000, 100_001, 1 << 30} {
		got, info, err := objstore.GetTail(ctx, s, "f", n)
		if err != nil {
			t.Fatalf("GetTail(f, %d): %v", n, err)
		}
		if want := data[len(data)-int(min(n, int64(len(data)))):]; !bytes.Equal(got, want) || info.Size != int64(len(data)) || info.Key != "f" {
			t.Fatalf("GetTail(f, %d) = %d bytes, %+v; want the last %d of %d", n, len(got), info, len(want), len(data))
		}
	}
	for _, n := range []int64{0, 10} {
		got, info, err := objstore.GetTail(ctx, s, "empty", n)
		if err != nil || len(got) != 0 || info.Size != 0 {
			t.Fatalf("GetTail(empty, %d) = %d bytes, %+v, %v; want nothing", n, len(got), info, err)
		}
	}
	if _, _, err := objstore.GetTail(ctx, s, "missing", 10); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("GetTail(missing) err = %v, want ErrNotFound", err)
	}
	if _, _, err := objstore.GetTail(ctx, s, "f", -1); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Fatalf("GetTail(f, -1) err = %v, want ErrInvalidRange", err)
	}
	if opts.Requests != nil {
		want := int64(max(opts.TailRequests, 1))
		before := opts.Requests()
		if _, _, err := objstore.GetTail(ctx, s, "f", 64<<10); err != nil {
			t.Fatal(err)
		}
		if k := opts.Requests() - before; k != want {
			t.Errorf("GetTail(f, 64 KiB) took %d requests, want %d", k, want)
		}
	}
}
