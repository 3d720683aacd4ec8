package rollout

import (
	"context"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// TestRegression_NewestAcrossShardsAgreesInListAndGet: one id written by
// two workers (two shards) read back differently: a list of the WAL tier
// took the write of the shard listed last, a get the write sealed last.
// Both now follow wal's one rule (the later seal wins), whichever shard
// lists first.
func TestRegression_NewestAcrossShardsAgreesInListAndGet(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	w1 := mustStore(t, newCatalog(t, root, "w1", quiet(Options{})), "exp")
	w2 := mustStore(t, newCatalog(t, root, "w2", quiet(Options{})), "exp")
	// The older write goes to the shard that lists last, so that list
	// order and seal order disagree.
	older, newer := w1, w2
	if ShardID("w1") < ShardID("w2") {
		older, newer = w2, w1
	}
	appendFlush(t, older, []Record{{ID: "x", RolloutID: "r", Content: ptr("old")}})
	appendFlush(t, newer, []Record{{ID: "x", RolloutID: "r", Content: ptr("new")}})
	for _, s := range []*Store{w1, w2} {
		r, err := s.Get(ctx, "x")
		if err != nil || *r.Content != "new" {
			t.Fatalf("get: %+v %v", r, err)
		}
		for _, src := range []Source{SourceWAL, SourceAll} {
			res, err := s.List(ctx, ListOptions{Source: src})
			if err != nil || len(res.Records) != 1 || *res.Records[0].Content != "new" {
				t.Fatalf("list %s: %+v %v", src, res, err)
			}
		}
	}
}
