package latencyproxy

import (
	"context"
	"testing"
	"time"
)

// TestTornListIsRetried: an S3 listing whose answer is cut mid-body (a
// connection reset) is asked again, as a torn ranged read is resumed.
// One torn ListObjectsV2 answer fails s3.Store.List (objstore/s3) today:
// the SDK's retryer does not retry a body that fails to decode
// ("deserialization failed ... unexpected EOF"), so every read that lists
// (shards, manifests, versions) answers 503.
func TestTornListIsRetried(t *testing.T) {
	for _, b := range backends()[:2] { // s3-gofakes3, s3 (versitygw)
		t.Run(b.name, func(t *testing.T) {
			p, front, _ := startProxy(t, b.target(t), 0)
			s := b.open(t, front.URL)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, k := range []string{"k/a", "k/b", "k/c"} {
				if err := s.Put(ctx, k, []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			p.Tear(OpList, 1, 100)
			infos, err := s.List(ctx, "k/")
			if err != nil || len(infos) != 3 {
				t.Fatalf("List after one torn answer: %d objects, %v (list requests: %d)", len(infos), err, p.Stats().ByOp[OpList])
			}
		})
	}
}
