package drivers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/azure"
	"github.com/lance-context/lance-context/objstore/gcs"
	"github.com/lance-context/lance-context/objstore/objstoretest"
	"github.com/lance-context/lance-context/objstore/s3"
)

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
	runCloud(t, url, objstoretest.Options{DeleteBatch: 1000})
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
		s, err := s3.New(context.Background(), s3.Config{
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
	s, err := s3.New(ctx, s3.Config{Bucket: "lc-test", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test"})
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

// TestS3DeleteManyIsARequestPer1000Keys: DeleteKeys of 2500 keys on S3
// is three DeleteObjects requests (1000 keys each at most), where Delete
// took 2500; the keys are gone and the others stay.
func TestS3DeleteManyIsARequestPer1000Keys(t *testing.T) {
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("lc-test"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var rt countingTransport
	s, err := s3.New(ctx, s3.Config{Bucket: "lc-test", Prefix: "p", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test", Transport: &rt})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2500
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("gen/%05d", i)
		if err := s.Put(ctx, keys[i], []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "kept", []byte("x")); err != nil {
		t.Fatal(err)
	}
	before := rt.n.Load()
	if err := objstore.DeleteKeys(ctx, s, keys); err != nil {
		t.Fatal(err)
	}
	if got := rt.n.Load() - before; got != 3 {
		t.Errorf("DeleteKeys of %d keys: %d requests, want 3", n, got)
	}
	left, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Key != "kept" {
		t.Fatalf("left after DeleteKeys: %d keys (%v...), want [kept]", len(left), left[:min(len(left), 3)])
	}
}

// TestOpen: Open answers the drivers' schemes once they are registered
// (this package imports them all), and refuses a URL without a bucket.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	s, err := objstore.Open(ctx, "s3://bucket/some/prefix")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*s3.Store); !ok {
		t.Fatalf("Open(s3://) = %T", s)
	}
	if _, err := objstore.Open(ctx, "s3:///nobucket"); err == nil {
		t.Fatal("Open(s3:///nobucket) succeeded")
	}
	t.Setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
	if s, err := objstore.Open(ctx, "gs://bucket/p"); err != nil {
		t.Fatal(err)
	} else if _, ok := s.(*gcs.Store); !ok {
		t.Fatalf("Open(gs://) = %T", s)
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "a2V5")
	t.Setenv("AZURE_STORAGE_ENDPOINT", "http://127.0.0.1:1/acct")
	if s, err := objstore.Open(ctx, "az://container/p"); err != nil {
		t.Fatal(err)
	} else if _, ok := s.(*azure.Store); !ok {
		t.Fatalf("Open(az://) = %T", s)
	}
	for _, u := range []string{"gs:///nobucket", "az:///nocontainer", "az://c/../x", "hdfs://x/y"} {
		if _, err := objstore.Open(ctx, u); err == nil {
			t.Fatalf("Open(%s) succeeded", u)
		}
	}
}
