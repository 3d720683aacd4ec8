package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/objstoretest"
)

func TestMemory(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return objstore.NewMemory() })
}

func TestLocal(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewLocal(filepath.Join(t.TempDir(), "root", "nested"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestFaultyZeroRates(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return objstore.NewFaulty(objstore.NewMemory(), objstore.FaultConfig{Seed: 1})
	})
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	a, err := objstore.Open(ctx, "mem://shared")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := objstore.Open(ctx, "mem://shared")
	c, _ := objstore.Open(ctx, "mem://other")
	if err := a.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("mem://shared reopened: %q, %v", got, err)
	}
	if _, err := c.Get(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("mem://other: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "a", "b")
	for _, u := range []string{dir, "file://" + dir} {
		s, err := objstore.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(*objstore.Local); !ok {
			t.Fatalf("Open(%q) = %T, want *Local", u, s)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("Open did not create %s: %v", dir, err)
	}

	if _, err := objstore.Open(ctx, "hdfs://x/y"); err == nil {
		t.Fatal("Open(hdfs://x/y) succeeded")
	}
}

func TestLocalSkipsTempFiles(t *testing.T) {
	ctx := context.Background()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "d/k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// A temporary file left by a crash is never listed.
	if err := os.WriteFile(filepath.Join(s.Root(), "d", ".tmp_crashed"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, "d/pending")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Write([]byte("pending"))
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "d/k" {
		t.Fatalf("List = %+v, want only d/k", infos)
	}
}

const (
	raceChildEnv = "LC_OBJSTORE_RACE_CHILD_DIR"
	raceChildID  = "LC_OBJSTORE_RACE_CHILD_ID"
)

// TestLocalMultiProcessRace starts 8 processes (this test binary, running
// TestLocalRaceChild) that PutIfAbsent one key at once: exactly one wins.
func TestLocalMultiProcessRace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const n = 8
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	cmds := make([]*exec.Cmd, n)
	outs := make([]*strings.Builder, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLocalRaceChild$", "-test.v")
		cmd.Env = append(os.Environ(), raceChildEnv+"="+dir, fmt.Sprintf("%s=%d", raceChildID, i))
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	time.Sleep(200 * time.Millisecond) // let the children reach the gate
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	winners := 0
	winner := -1
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		switch out := outs[i].String(); {
		case strings.Contains(out, "RESULT: won"):
			winners++
			winner = i
		case strings.Contains(out, "RESULT: exists"):
		default:
			t.Fatalf("child %d reported no result:\n%s", i, out)
		}
	}
	if winners != 1 {
		t.Fatalf("%d children won, want exactly 1", winners)
	}
	s, err := objstore.NewLocal(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "wal/00000001")
	if err != nil || string(got) != fmt.Sprintf("child %d", winner) {
		t.Fatalf("stored %q, %v; want the winner's (child %d)", got, err, winner)
	}
	infos, _ := s.List(context.Background(), "")
	if len(infos) != 1 {
		t.Fatalf("List = %+v, want one object", infos)
	}
}

// TestLocalRaceChild is one contender of TestLocalMultiProcessRace; it is
// skipped unless started by it.
func TestLocalRaceChild(t *testing.T) {
	dir := os.Getenv(raceChildEnv)
	if dir == "" {
		t.Skip("child of TestLocalMultiProcessRace")
	}
	id := os.Getenv(raceChildID)
	s, err := objstore.NewLocal(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gate never opened")
		}
		time.Sleep(time.Millisecond)
	}
	err = s.PutIfAbsent(context.Background(), "wal/00000001", []byte("child "+id))
	switch {
	case err == nil:
		fmt.Println("RESULT: won")
	case errors.Is(err, objstore.ErrExists):
		fmt.Println("RESULT: exists")
	default:
		t.Fatal(err)
	}
}
