package drivers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	_ "github.com/lance-context/lance-context/objstore/drivers"
	"github.com/lance-context/lance-context/objstore/objstoretest"
)

// emulatorURL returns the URL in env, or skips the test when it is unset;
// with require=1 in the environment an unset URL fails the test instead (CI
// sets LC_REQUIRE_GCS=1 and LC_REQUIRE_AZURE=1).
func emulatorURL(t *testing.T, env, require, how string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		msg := fmt.Sprintf("%s is not set (%s)", env, how)
		if os.Getenv(require) == "1" {
			t.Fatalf("%s, and %s=1", msg, require)
		}
		t.Skip(msg)
	}
	return u
}

// countingTransport counts the HTTP requests a cloud backend sends, and
// keeps the query of the last.
type countingTransport struct {
	n    atomic.Int64
	last atomic.Pointer[url.Values]
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	q := r.URL.Query()
	c.last.Store(&q)
	return http.DefaultTransport.RoundTrip(r)
}

// runCloud runs the conformance suite on fresh prefixes under url, counting
// the backend's requests.
func runCloud(t *testing.T, url string, opts objstoretest.Options) {
	var rt countingTransport
	root, err := objstore.OpenWith(context.Background(), url, objstore.OpenOptions{Transport: &rt})
	if err != nil {
		t.Fatal(err)
	}
	opts.Requests = rt.n.Load
	run := "run-" + randomSuffix(t)
	var n atomic.Int64
	objstoretest.RunWith(t, func(t *testing.T) objstore.Store {
		s := objstore.Sub(root, fmt.Sprintf("%s/%d", run, n.Add(1)))
		t.Cleanup(func() { cleanup(t, s) })
		return s
	}, opts)
}

// TestGCS runs the suite against a GCS server named by LC_TEST_GCS_URL
// (fake-gcs-server in CI: scripts/fakegcs.sh), with the endpoint in
// STORAGE_EMULATOR_HOST.
func TestGCS(t *testing.T) {
	runCloud(t, emulatorURL(t, "LC_TEST_GCS_URL", "LC_REQUIRE_GCS",
		`run scripts/fakegcs.sh start DIR and eval "$(scripts/fakegcs.sh env DIR)"`),
		// The Go client has no batch requests: a delete a key.
		objstoretest.Options{DeleteBatch: 1})
}

// TestAzure runs the suite against an Azure Blob service named by
// LC_TEST_AZURE_URL (Azurite in CI: scripts/azurite.sh), with the account
// in the AZURE_STORAGE_* variables.
func TestAzure(t *testing.T) {
	runCloud(t, emulatorURL(t, "LC_TEST_AZURE_URL", "LC_REQUIRE_AZURE",
		`run scripts/azurite.sh start DIR and eval "$(scripts/azurite.sh env DIR)"`),
		// Azure takes no suffix range: a tail is a Head and a ranged read.
		// Deletes go in blob batches of 256.
		objstoretest.Options{TailRequests: 2, DeleteBatch: 256})
}

// TestCloudListFirstAsksForOnePage: on each cloud backend with a server
// configured, ListFirst is one list request that asks for a page of n keys
// (max-keys, maxResults, maxresults). The emulators answer a whole listing
// in one page whatever they are asked, so a count of requests alone would
// not tell ListFirst from List.
func TestCloudListFirstAsksForOnePage(t *testing.T) {
	for _, c := range []struct{ name, env, param string }{
		{"s3", "LC_TEST_S3_URL", "max-keys"},
		{"gcs", "LC_TEST_GCS_URL", "maxResults"},
		{"azure", "LC_TEST_AZURE_URL", "maxresults"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := os.Getenv(c.env)
			if u == "" {
				t.Skipf("%s is not set", c.env)
			}
			ctx := context.Background()
			var rt countingTransport
			root, err := objstore.OpenWith(ctx, u, objstore.OpenOptions{Transport: &rt})
			if err != nil {
				t.Fatal(err)
			}
			s := objstore.Sub(root, "first-"+randomSuffix(t))
			t.Cleanup(func() { cleanup(t, s) })
			for _, k := range []string{"v/3", "v/1", "v/2"} {
				if err := s.Put(ctx, k, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			before := rt.n.Load()
			infos, err := objstore.ListFirst(ctx, s, "v/", 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != 2 || infos[0].Key != "v/1" || infos[1].Key != "v/2" {
				t.Fatalf("ListFirst = %+v, want v/1, v/2", infos)
			}
			if k := rt.n.Load() - before; k != 1 {
				t.Fatalf("ListFirst took %d requests, want 1", k)
			}
			if q := *rt.last.Load(); q.Get(c.param) != "2" {
				t.Fatalf("the list request asked for %s=%q, want 2 (query %s)", c.param, q.Get(c.param), strings.ReplaceAll(q.Encode(), "&", " "))
			}
		})
	}
}
