package objstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

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

func randomSuffix(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// TestS3 runs the suite against a real S3-compatible server (versitygw in
// CI: see scripts/versitygw.sh) named by LC_TEST_S3_URL, with credentials and
// endpoint from the usual AWS_* variables.
func TestS3(t *testing.T) {
	url := os.Getenv("LC_TEST_S3_URL")
	if url == "" {
		t.Skip("LC_TEST_S3_URL is not set (e.g. s3://lc-test/conformance; run scripts/versitygw.sh start DIR and eval $(scripts/versitygw.sh env DIR))")
	}
	runCloud(t, url, objstoretest.Options{})
}

func cleanup(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	for _, i := range infos {
		if err := s.Delete(ctx, i.Key); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
}

// TestS3GoFakeS3 runs the suite against gofakes3's in-memory backend in an
// in-process server. gofakes3 v1.2.0 checks If-None-Match under its backend
// lock, so the create-only race runs against it too.
func TestS3GoFakeS3(t *testing.T) {
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("lc-test"); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	objstoretest.RunWith(t, func(t *testing.T) objstore.Store {
		s, err := objstore.NewS3(context.Background(), objstore.S3Config{
			Bucket: "lc-test", Prefix: fmt.Sprintf("t%d", n.Add(1)),
			Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
			PartSize: 5 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, objstoretest.Options{LargeSize: 11 << 20})
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

	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	s, err := objstore.Open(ctx, "s3://bucket/some/prefix")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*objstore.S3); !ok {
		t.Fatalf("Open(s3://) = %T", s)
	}
	if _, err := objstore.Open(ctx, "s3:///nobucket"); err == nil {
		t.Fatal("Open(s3:///nobucket) succeeded")
	}
	t.Setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
	if s, err := objstore.Open(ctx, "gs://bucket/p"); err != nil {
		t.Fatal(err)
	} else if _, ok := s.(*objstore.GCS); !ok {
		t.Fatalf("Open(gs://) = %T", s)
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "a2V5")
	t.Setenv("AZURE_STORAGE_ENDPOINT", "http://127.0.0.1:1/acct")
	if s, err := objstore.Open(ctx, "az://container/p"); err != nil {
		t.Fatal(err)
	} else if _, ok := s.(*objstore.Azure); !ok {
		t.Fatalf("Open(az://) = %T", s)
	}
	for _, u := range []string{"gs:///nobucket", "az:///nocontainer", "az://c/../x", "hdfs://x/y"} {
		if _, err := objstore.Open(ctx, u); err == nil {
			t.Fatalf("Open(%s) succeeded", u)
		}
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

// TestRegression_S3ListFirstPastOnePage: ListFirst with n above S3's 1000
// keys a request returned only the first page (MaxKeys was capped at 1000
// and no further page was asked for).
func TestRegression_S3ListFirstPastOnePage(t *testing.T) {
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("lc-test"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: "lc-test", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 1003
	for i := range keys {
		if err := s.Put(ctx, fmt.Sprintf("v/%04d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := objstore.ListFirst(ctx, s, "v/", 1002)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1002 || infos[1001].Key != "v/1001" {
		t.Fatalf("ListFirst(v/, 1002) = %d keys, want 1002 ending with v/1001", len(infos))
	}
}
