package rollout

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/lance-context/lance-context/objstore"
)

// payloadStore is a store of 200 merged records with inline payloads
// ("base m-NNN"), then 5 pending generations of two new records each and
// a last one that rewrites m-050 with another payload and content type.
func payloadStore(t *testing.T, root objstore.Store, name string) *Store {
	t.Helper()
	s := mustStore(t, newCatalog(t, root, "w", rtOptions(Options{})), name)
	rs := recs("m", 200, "m")
	for i := range rs {
		rs[i].BinaryPayload = []byte("base " + rs[i].ID)
	}
	appendFlush(t, s, rs)
	mergeAll(t, s)
	for g := range 5 {
		appendFlush(t, s, []Record{
			{ID: fmt.Sprintf("a-%d", g), RolloutID: "p", BinaryPayload: []byte(fmt.Sprintf("pending a-%d", g))},
			{ID: fmt.Sprintf("z-%d", g), RolloutID: "p", BinaryPayload: []byte(fmt.Sprintf("pending z-%d", g))},
		})
	}
	appendFlush(t, s, []Record{{ID: "m-050", RolloutID: "m", BinaryPayload: []byte("pending m-050"), ContentType: "image/png"}})
	return s
}

func payloadOf(ctx context.Context, s *Store, id string, v uint64) (string, string, error) {
	p, err := s.OpenPayload(ctx, id, v)
	if err != nil {
		return "", "", err
	}
	b, err := io.ReadAll(p)
	return string(b), p.ContentType, err
}

// TestOpenPayloadFollowsTheView: a payload is served from the row the
// view shows: a pending row hides the base row of its id (m-050's rewrite
// wins), on a cold handle (the pending generations not yet read: the base
// is looked up beside them) and once a page of all has read them all; a
// read of the base version alone shows the base row.
func TestOpenPayloadFollowsTheView(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	s := payloadStore(t, mem, "pl")
	cold := mustStore(t, newCatalog(t, mem, "reader", rtOptions(Options{})), "pl")
	for i, st := range []*Store{cold, cold, s} {
		if i > 0 {
			if _, err := st.List(ctx, ListOptions{Source: SourceAll, Limit: 1000}); err != nil { // reads every pending generation
				t.Fatal(err)
			}
		}
		for id, want := range map[string]string{"m-123": "base m-123", "z-0": "pending z-0", "a-4": "pending a-4", "m-050": "pending m-050"} {
			got, ct, err := payloadOf(ctx, st, id, 0)
			if err != nil || got != want {
				t.Fatalf("payload of %s: %q %v, want %q", id, got, err, want)
			}
			if wantCT := map[bool]string{true: "image/png", false: "application/octet-stream"}[id == "m-050"]; ct != wantCT {
				t.Errorf("content type of %s: %q, want %q", id, ct, wantCT)
			}
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := payloadOf(ctx, s, "m-050", st.Version); err != nil || got != "base m-050" {
		t.Fatalf("payload of m-050 at base version %d: %q %v, want the base row's", st.Version, got, err)
	}
	if _, _, err := payloadOf(ctx, s, "z-0", st.Version); err == nil {
		t.Fatal("a pending row's payload read from the base version alone")
	}
}

// TestRoundTripsColdOpenPayload pins a cold payload read: the pending
// generations whose id range may hold the id are read in one wave beside
// the base's lookup (the view's get), then the row's payload columns from
// the generation file when a pending row wins.
func TestRoundTripsColdOpenPayload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a merged store")
	}
	ctx := context.Background()
	mem := objstore.NewMemory()
	payloadStore(t, mem, "rtpl")
	pins := []struct {
		id, want             string
		requests, sequential int
	}{
		// The counts of openPayload when it looked the id up itself
		// (findPending, then the base): the same. A base row waits for
		// the base's index and row reads; a pending row for the wave,
		// then its generation file's payload columns.
		{"m-123", "base m-123", 13, 4},
		{"z-0", "pending z-0", 14, 5},
		{"m-050", "pending m-050", 15, 5},
	}
	for _, p := range pins {
		got := coldCounts(t, mem, "rtpl", p.sequential, func(cs *Store) error {
			data, _, err := payloadOf(ctx, cs, p.id, 0)
			if err == nil && data != p.want {
				err = fmt.Errorf("payload %q, want %q", data, p.want)
			}
			return err
		}, nil)
		t.Logf("cold payload of %s: %v", p.id, got)
		checkCounts(t, "cold payload "+p.id, got, p.requests, p.sequential, 0)
	}
}
