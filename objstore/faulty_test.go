package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// outcome runs a fixed sequence of operations and records what each returned.
func outcome(t *testing.T, f *objstore.Faulty) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	rec := func(op string, err error) {
		switch {
		case err == nil:
			out = append(out, op+":ok")
		case errors.Is(err, objstore.ErrInjected):
			out = append(out, op+":injected")
		default:
			out = append(out, op+":"+err.Error())
		}
	}
	for i := range 200 {
		key := fmt.Sprintf("k/%03d", i%17)
		switch i % 5 {
		case 0:
			rec("put", f.Put(ctx, key, []byte("v")))
		case 1:
			rec("pia", f.PutIfAbsent(ctx, fmt.Sprintf("p/%03d", i), []byte("v")))
		case 2:
			_, err := f.Head(ctx, key)
			if errors.Is(err, objstore.ErrNotFound) {
				err = nil
			}
			rec("head", err)
		case 3:
			_, err := f.List(ctx, "k/")
			rec("list", err)
		case 4:
			rec("delete", f.Delete(ctx, key))
		}
	}
	return out
}

func TestFaultyReplayable(t *testing.T) {
	cfg := objstore.FaultConfig{
		Seed:    42,
		Default: objstore.Rates{Error: 0.2, LostAck: 0.2},
	}
	a := outcome(t, objstore.NewFaulty(objstore.NewMemory(), cfg))
	b := outcome(t, objstore.NewFaulty(objstore.NewMemory(), cfg))
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different outcomes:\n%q\n%q", a, b)
	}
	injected := 0
	for _, o := range a {
		if strings.HasSuffix(o, ":injected") {
			injected++
		}
	}
	if injected < 40 || injected > 120 {
		t.Fatalf("%d of 200 calls injected, want about 72", injected)
	}
	cfg.Seed = 43
	if c := outcome(t, objstore.NewFaulty(objstore.NewMemory(), cfg)); slices.Equal(a, c) {
		t.Fatal("different seeds gave identical outcomes")
	}
}

func TestFaultyLostAck(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMemory()
	f := objstore.NewFaulty(inner, objstore.FaultConfig{Seed: 7, PerOp: map[objstore.Op]objstore.Rates{
		objstore.OpPut:         {LostAck: 1},
		objstore.OpPutIfAbsent: {LostAck: 1},
		objstore.OpCommit:      {LostAck: 1},
	}})
	err := f.PutIfAbsent(ctx, "wal/1", []byte("entry"))
	var ie *objstore.InjectedError
	if !errors.Is(err, objstore.ErrInjected) || !errors.As(err, &ie) || !ie.LostAck || ie.Op != objstore.OpPutIfAbsent {
		t.Fatalf("PutIfAbsent err = %#v, want a lost-ack InjectedError", err)
	}
	if got, err := inner.Get(ctx, "wal/1"); err != nil || string(got) != "entry" {
		t.Fatalf("inner after lost ack: %q, %v; want the write", got, err)
	}
	// A retry now finds the key taken: the caller must read back.
	if err := f.PutIfAbsent(ctx, "wal/1", []byte("entry")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retry err = %v, want ErrExists", err)
	}
	if err := f.Put(ctx, "m", []byte("x")); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Put err = %v", err)
	}
	if _, err := inner.Head(ctx, "m"); err != nil {
		t.Fatalf("inner after lost-ack Put: %v", err)
	}
	w, err := f.Create(ctx, "data/f")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("file"))
	if err := w.Close(); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Close err = %v", err)
	}
	if got, err := inner.Get(ctx, "data/f"); err != nil || string(got) != "file" {
		t.Fatalf("inner after lost-ack commit: %q, %v", got, err)
	}
	if got := len(f.Events()); got != 4 {
		t.Fatalf("%d events, want 4: %+v", got, f.Events())
	}
}

func TestFaultyErrorChangesNothing(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMemory()
	f := objstore.NewFaulty(inner, objstore.FaultConfig{Default: objstore.Rates{Error: 1}})
	for name, err := range map[string]error{
		"put":    f.Put(ctx, "a", []byte("x")),
		"pia":    f.PutIfAbsent(ctx, "b", []byte("x")),
		"delete": f.Delete(ctx, "c"),
	} {
		if !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("%s err = %v, want ErrInjected", name, err)
		}
	}
	if _, err := f.Get(ctx, "a"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Get err = %v", err)
	}
	if _, err := f.Create(ctx, "d"); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Create err = %v", err)
	}
	if infos, _ := inner.List(ctx, ""); len(infos) != 0 {
		t.Fatalf("inner has %+v after injected errors", infos)
	}
}

func TestFaultyFailNth(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMemory()
	// The random rates must not apply where the hook says FaultPass.
	f := objstore.NewFaulty(inner, objstore.FaultConfig{
		Default: objstore.Rates{Error: 1},
		Hook:    objstore.FailNth(objstore.OpPutIfAbsent, 3, objstore.FaultError),
	})
	for i := 1; i <= 5; i++ {
		err := f.PutIfAbsent(ctx, fmt.Sprintf("wal/%d", i), []byte("x"))
		if (i == 3) != errors.Is(err, objstore.ErrInjected) || (i != 3 && err != nil) {
			t.Fatalf("call %d: err = %v", i, err)
		}
	}
	if _, err := inner.Head(ctx, "wal/3"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("wal/3 written despite the injected error: %v", err)
	}
	if n := f.Calls(objstore.OpPutIfAbsent); n != 5 {
		t.Fatalf("Calls = %d, want 5", n)
	}
	ev := f.Events()
	if len(ev) != 1 || ev[0] != (objstore.Event{Op: objstore.OpPutIfAbsent, Key: "wal/3", Call: 3, Fault: objstore.FaultError}) {
		t.Fatalf("Events = %+v", ev)
	}

	// FailKey targets a key; FailNth on a writer's commit step.
	f.SetHook(objstore.FailKey(objstore.OpPut, func(k string) bool { return k == "manifest/2" }, objstore.FaultLostAck))
	if err := f.Put(ctx, "manifest/1", nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Put(ctx, "manifest/2", nil); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Put(manifest/2) err = %v", err)
	}
	f.SetHook(objstore.FailNth(objstore.OpCommit, 1, objstore.FaultError))
	w, err := f.Create(ctx, "data/x")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	if err := w.Close(); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Close err = %v", err)
	}
	if _, err := inner.Head(ctx, "data/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("failed commit left an object: %v", err)
	}
}

func TestFaultyLatency(t *testing.T) {
	f := objstore.NewFaulty(objstore.NewMemory(), objstore.FaultConfig{
		Seed:    1,
		Default: objstore.Rates{MinLatency: 20 * time.Millisecond, MaxLatency: 30 * time.Millisecond},
	})
	start := time.Now()
	if err := f.Put(context.Background(), "k", nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Put took %v, want >= 20ms", d)
	}
	// Latency honours cancellation.
	f = objstore.NewFaulty(objstore.NewMemory(), objstore.FaultConfig{
		Default: objstore.Rates{MinLatency: time.Hour, MaxLatency: time.Hour},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Get(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get err = %v, want DeadlineExceeded", err)
	}
}
