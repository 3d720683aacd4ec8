package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

func putKeys(t *testing.T, s objstore.Store, n int, prefix string) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%05d", prefix, i)
		if err := s.Put(context.Background(), keys[i], []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func listed(t *testing.T, s objstore.Store) []string {
	t.Helper()
	infos, err := s.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

// TestDeleteKeysCountsABatchPer1000Keys: through Counting (and a Sub
// view of it, and SmallFiles over it), 2500 keys are 3 OpDeleteMany
// requests and no single delete.
func TestDeleteKeysCountsABatchPer1000Keys(t *testing.T) {
	for _, wrap := range []string{"counting", "sub", "smallfiles"} {
		t.Run(wrap, func(t *testing.T) {
			c := objstore.NewCounting(objstore.NewMemory(), 0)
			var s objstore.Store = c
			switch wrap {
			case "sub":
				s = objstore.Sub(c, "root")
			case "smallfiles":
				s = objstore.NewSmallFiles(c, func(string) bool { return true }, 10)
			}
			keys := putKeys(t, s, 2500, "gen/")
			c.Reset()
			if err := objstore.DeleteKeys(context.Background(), s, keys); err != nil {
				t.Fatal(err)
			}
			got := c.Counts()
			if got.Calls[objstore.OpDeleteMany] != 3 || got.Calls[objstore.OpDelete] != 0 || got.Requests() != 3 {
				t.Fatalf("DeleteKeys of 2500 keys: %v, want 3 deletemany", got)
			}
			if left := listed(t, s); len(left) != 0 {
				t.Fatalf("%d keys left", len(left))
			}
		})
	}
}

// TestDeleteKeysFaultyFailsMatchedKeys: a Faulty store fails a batch's
// keys that its OpDelete hook matches (and only those); a lost ack
// deletes the key and still reports it.
func TestDeleteKeysFaultyFailsMatchedKeys(t *testing.T) {
	ctx := context.Background()
	for _, fault := range []objstore.Fault{objstore.FaultError, objstore.FaultLostAck} {
		t.Run(fault.String(), func(t *testing.T) {
			mem := objstore.NewMemory()
			f := objstore.NewFaulty(mem, objstore.FaultConfig{
				Hook: objstore.FailKey(objstore.OpDelete, func(k string) bool { return strings.HasSuffix(k, "3") }, fault),
			})
			keys := putKeys(t, f, 20, "g/")
			err := objstore.DeleteKeys(ctx, f, keys)
			if !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("err = %v, want an injected fault", err)
			}
			want := []string{"g/00003", "g/00013"}
			if got := objstore.NotDeleted(err, keys); !slices.Equal(got, want) {
				t.Fatalf("NotDeleted = %q, want %q", got, want)
			}
			left := listed(t, mem)
			if fault == objstore.FaultLostAck {
				want = nil
			}
			if !slices.Equal(left, want) {
				t.Fatalf("left %q, want %q", left, want)
			}
		})
	}
}

// plainStore hides every optional interface of the store it holds.
type plainStore struct {
	objstore.Store
	deletes atomic.Int64
	fail    string
}

func (p *plainStore) Delete(ctx context.Context, key string) error {
	p.deletes.Add(1)
	if key == p.fail {
		return errors.New("refused")
	}
	return p.Store.Delete(ctx, key)
}

// TestDeleteKeysFallsBackToDelete: on a store without DeleteMany,
// DeleteKeys deletes each key once and names the one that failed.
func TestDeleteKeysFallsBackToDelete(t *testing.T) {
	p := &plainStore{Store: objstore.NewMemory(), fail: "k/00007"}
	keys := putKeys(t, p, 50, "k/")
	err := objstore.DeleteKeys(context.Background(), p, keys)
	if got := objstore.NotDeleted(err, keys); !slices.Equal(got, []string{"k/00007"}) {
		t.Fatalf("NotDeleted = %q (%v)", got, err)
	}
	if n := p.deletes.Load(); n != 50 {
		t.Fatalf("%d deletes, want 50", n)
	}
	if left := listed(t, p); !slices.Equal(left, []string{"k/00007"}) {
		t.Fatalf("left %q", left)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := objstore.DeleteKeys(ctx, p, []string{"k/00007"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: err = %v", err)
	}
}

// TestDiscardKeysOnLocal: DiscardKeys and DeleteKeys both delete on local
// disk, through Sub, and drop SmallFiles' cached copies.
func TestDiscardKeysOnLocal(t *testing.T) {
	l, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := objstore.NewSmallFiles(objstore.Sub(l, "shard"), func(string) bool { return true }, 100)
	ctx := context.Background()
	a := putKeys(t, s, 10, "gen/a")
	b := putKeys(t, s, 10, "wal/b")
	for _, k := range append(a, b...) {
		if _, err := s.Head(ctx, k); err != nil { // cached
			t.Fatal(err)
		}
	}
	if err := objstore.DiscardKeys(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	if err := objstore.DeleteKeys(ctx, s, b); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(a, b...) {
		if _, err := s.Get(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Get(%s) after delete: %v", k, err)
		}
	}
	if left := listed(t, l); len(left) != 0 {
		t.Fatalf("left %q", left)
	}
}
