package latencyproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/azure"
	"github.com/lance-context/lance-context/objstore/gcs"
	"github.com/lance-context/lance-context/objstore/s3"
)

// The real object-store clients through the proxy: the proxy classifies
// their requests as documented, and the stores' PutIfAbsent keeps its
// contract when the answer to a write that succeeded is lost.

type backend struct {
	name string
	// open returns a store whose requests go to endpoint.
	open func(t *testing.T, endpoint string) objstore.Store
	// target is the server the proxy forwards to.
	target func(t *testing.T) string
}

func suffix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func backends() []backend {
	return []backend{
		{"s3-gofakes3", func(t *testing.T, ep string) objstore.Store {
			s, err := s3.New(context.Background(), s3.Config{
				Bucket: "lc-test", Prefix: "p-" + suffix(), Endpoint: ep, AccessKeyID: "test", SecretAccessKey: "test",
			})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, func(t *testing.T) string {
			be := s3mem.New()
			if err := be.CreateBucket("lc-test"); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(gofakes3.New(be).Server())
			t.Cleanup(srv.Close)
			return srv.URL
		}},
		{"s3", func(t *testing.T, ep string) objstore.Store {
			bucket, prefix := bucketOf(t, "LC_TEST_S3_URL", "s3://")
			cfg := s3.ConfigFromEnv()
			cfg.Bucket, cfg.Prefix, cfg.Endpoint = bucket, prefix+"/p-"+suffix(), ep
			s, err := s3.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, func(t *testing.T) string {
			need(t, "LC_TEST_S3_URL", "LC_REQUIRE_S3")
			return s3.ConfigFromEnv().Endpoint
		}},
		{"gcs", func(t *testing.T, ep string) objstore.Store {
			bucket, prefix := bucketOf(t, "LC_TEST_GCS_URL", "gs://")
			s, err := gcs.New(context.Background(), gcs.Config{Bucket: bucket, Prefix: prefix + "/p-" + suffix(), Endpoint: ep})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, func(t *testing.T) string {
			need(t, "LC_TEST_GCS_URL", "LC_REQUIRE_GCS")
			ep := os.Getenv("STORAGE_EMULATOR_HOST")
			if !strings.Contains(ep, "://") {
				ep = "http://" + ep
			}
			return ep
		}},
		{"azure", func(t *testing.T, ep string) objstore.Store {
			cont, prefix := bucketOf(t, "LC_TEST_AZURE_URL", "az://")
			cfg := azure.ConfigFromEnv()
			u, err := url.Parse(cfg.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Endpoint = ep + u.Path // the account's path
			cfg.Container, cfg.Prefix = cont, prefix+"/p-"+suffix()
			s, err := azure.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, func(t *testing.T) string {
			need(t, "LC_TEST_AZURE_URL", "LC_REQUIRE_AZURE")
			u, err := url.Parse(os.Getenv("AZURE_STORAGE_ENDPOINT"))
			if err != nil || u.Host == "" {
				t.Fatalf("AZURE_STORAGE_ENDPOINT=%q: want http://host:port/account", os.Getenv("AZURE_STORAGE_ENDPOINT"))
			}
			return u.Scheme + "://" + u.Host
		}},
	}
}

func need(t *testing.T, env, require string) {
	if os.Getenv(env) != "" {
		return
	}
	if os.Getenv(require) == "1" {
		t.Fatalf("%s is not set, and %s=1", env, require)
	}
	t.Skipf("%s is not set (scripts/versitygw.sh, scripts/fakegcs.sh, scripts/azurite.sh)", env)
}

func bucketOf(t *testing.T, env, scheme string) (string, string) {
	b, p, _ := strings.Cut(strings.TrimPrefix(os.Getenv(env), scheme), "/")
	if p == "" {
		p = "latencyproxy"
	}
	return b, strings.Trim(p, "/")
}

func TestStoresThroughProxy(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			p, front, _ := startProxy(t, b.target(t), 0)
			s := b.open(t, front.URL)
			ctx := context.Background()
			p.Reset()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(s.Put(ctx, "a", []byte("0123456789")))
			must(s.PutIfAbsent(ctx, "b", []byte("x")))
			if err := s.PutIfAbsent(ctx, "b", []byte("y")); !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("second PutIfAbsent: %v", err)
			}
			_, err := s.Get(ctx, "a")
			must(err)
			got, err := s.GetRange(ctx, "a", 2, 3)
			must(err)
			if string(got) != "234" {
				t.Fatalf("GetRange = %q", got)
			}
			_, err = s.Head(ctx, "a")
			must(err)
			infos, err := s.List(ctx, "")
			must(err)
			if len(infos) != 2 {
				t.Fatalf("List = %+v", infos)
			}
			must(s.Delete(ctx, "a"))
			must(s.Delete(ctx, "b"))
			st := p.Stats()
			want := map[Op]int{OpPut: 1, OpPutConditional: 2, OpGet: 1, OpGetRange: 1, OpHead: 1, OpList: 1, OpDelete: 2}
			for op, n := range want {
				if st.ByOp[op] != n {
					t.Errorf("%s requests = %d, want %d (all: %v)", op, st.ByOp[op], n, st.ByOp)
				}
			}
			if st.Requests != 9 {
				t.Errorf("requests = %d, want 9 (%v)", st.Requests, st.ByOp)
			}
		})
	}
}

// TestLostAckPutIfAbsent: the proxy carries out a conditional write and
// drops its answer. PutIfAbsent must retry, find the key taken, read it
// back, and report its own write as the success it was; a writer with
// other content still gets ErrExists.
func TestLostAckPutIfAbsent(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			p, front, _ := startProxy(t, b.target(t), 0)
			s := b.open(t, front.URL)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			data := []byte("generation 7 manifest")
			p.Lose(OpPutConditional, 1)
			if err := s.PutIfAbsent(ctx, "wal/00000007", data); err != nil {
				t.Fatalf("PutIfAbsent with its answer lost: %v (want success: the write was its own)", err)
			}
			if st := p.Stats(); st.Lost != 1 || st.ByOp[OpPutConditional] < 2 {
				t.Fatalf("the answer was not dropped and retried: %+v", st)
			}
			got, err := s.Get(ctx, "wal/00000007")
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("stored %q, %v", got, err)
			}
			// Another writer whose answer is lost too: its retry finds
			// someone else's object, so it did not win.
			p.Lose(OpPutConditional, 1)
			if err := s.PutIfAbsent(ctx, "wal/00000007", []byte("other")); !errors.Is(err, objstore.ErrExists) {
				t.Fatalf("competing PutIfAbsent: %v, want ErrExists", err)
			}
			if got, _ := s.Get(ctx, "wal/00000007"); !bytes.Equal(got, data) {
				t.Fatalf("object changed to %q", got)
			}
			s.Delete(ctx, "wal/00000007")
		})
	}
}
