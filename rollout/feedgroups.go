package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/objstore"
)

// A consumer group's commits are a chain of objects beside the table,
// _lc_feed/{group}/{20 digits of MaxUint64-n}.json for commit n (1, 2, ...),
// each the wire type FeedGroup: the newest sorts first, so ListFirst finds
// it in one request. Commit n+1 is written put-if-absent, so a commit whose
// write was delayed (a stalled request, a worker killed while its put was
// on the wire) can never land over a newer one: its name is taken, and it
// fails. A plain overwrite would let such a put move the group back and
// deliver rows again (the fault suite caught it). Older commits are
// deleted, keeping feedKeep; a late put of a deleted name lands below the
// newest and is never read.
const feedDir = "_lc_feed/"

// feedKeep is how many of a group's newest commits stay.
const feedKeep = 3

// FeedGroup is a consumer group's committed position.
type FeedGroup = api.FeedGroup

// validGroup checks a consumer group name: a store name's characters.
func validGroup(g string) error {
	if !validName(g) {
		return invalid("consumer group %q: use 1 to 128 of A-Z a-z 0-9 . _ -, not starting with . _ or -", clip(g, 40))
	}
	return nil
}

func feedKey(group string, n uint64) string {
	return fmt.Sprintf("%s%s/%020d.json", feedDir, group, math.MaxUint64-n)
}

// feedCommitNumber reads n back from a commit's key.
func feedCommitNumber(key string) (uint64, bool) {
	i := strings.LastIndexByte(key, '/')
	v, err := strconv.ParseUint(strings.TrimSuffix(key[i+1:], ".json"), 10, 64)
	return math.MaxUint64 - v, err == nil
}

// feedCommit is a group's newest commit and its number (0: none).
func (s *Store) feedCommit(ctx context.Context, group string) (*FeedGroup, uint64, error) {
	for attempt := 0; ; attempt++ {
		infos, err := objstore.ListFirst(ctx, s.root, feedDir+group+"/", 1)
		if err != nil {
			return nil, 0, fmt.Errorf("rollout: feed group %s of store %s: %w", group, s.name, err)
		}
		if len(infos) == 0 {
			return nil, 0, nil
		}
		n, ok := feedCommitNumber(infos[0].Key)
		if !ok {
			return nil, 0, fmt.Errorf("rollout: feed group %s of store %s: unexpected object %s", group, s.name, infos[0].Key)
		}
		b, err := s.root.Get(ctx, infos[0].Key)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 3 {
			continue // deleted with its group meanwhile
		}
		if err != nil {
			return nil, 0, err
		}
		var g FeedGroup
		if err := json.Unmarshal(b, &g); err != nil {
			return nil, 0, fmt.Errorf("rollout: consumer group %s of store %s is damaged (%s): %w", group, s.name, infos[0].Key, err)
		}
		return &g, n, nil
	}
}

// CommitFeed records pos as group's position: a consumer that restarts,
// here or in another process, resumes after it. Committing the same
// position again changes nothing but the time; a position may move back
// (to read again), as a Kafka consumer may seek. Commits take effect in
// the order they reach storage, and one that reaches it late fails rather
// than undo a newer one.
func (s *Store) CommitFeed(ctx context.Context, group string, pos Position) (*FeedGroup, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	g := &FeedGroup{Group: group, Position: pos.String(), CommittedAt: s.clockNow().UTC()}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 16; attempt++ {
		cur, n, err := s.feedCommit(ctx, group)
		if err != nil {
			return nil, err
		}
		if cur != nil && cur.Position == g.Position && cur.CommittedAt.Equal(g.CommittedAt) {
			return g, nil // an earlier attempt of ours landed
		}
		err = s.root.PutIfAbsent(ctx, feedKey(group, n+1), b)
		if errors.Is(err, objstore.ErrExists) {
			continue // another commit took n+1 (or ours did, ambiguously): read again
		}
		if err != nil {
			return nil, fmt.Errorf("rollout: commit feed group %s of store %s: %w", group, s.name, err)
		}
		if n+1 > feedKeep {
			// Best effort: a leftover costs a listing entry, not a wrong read.
			_ = s.root.Delete(ctx, feedKey(group, n+1-feedKeep))
		}
		return g, nil
	}
	return nil, fmt.Errorf("%w: consumer group %s of store %s: commits keep racing; commit from one consumer at a time", ErrConflict, group, s.name)
}

// FeedGroup returns a group's committed position; ErrNotFound for a group
// that never committed (it starts at the beginning).
func (s *Store) FeedGroup(ctx context.Context, group string) (*FeedGroup, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	g, _, err := s.feedCommit(ctx, group)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: consumer group %s of store %s has committed no position", ErrNotFound, group, s.name)
	}
	return g, nil
}

// FeedGroupPosition is where group reads next: its committed position, or
// the beginning.
func (s *Store) FeedGroupPosition(ctx context.Context, group string) (Position, error) {
	g, err := s.FeedGroup(ctx, group)
	if errors.Is(err, ErrNotFound) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, err
	}
	return ParsePosition(g.Position)
}

// FeedGroups lists the groups with a committed position, by name.
func (s *Store) FeedGroups(ctx context.Context) ([]FeedGroup, error) {
	infos, err := s.root.List(ctx, feedDir)
	if err != nil {
		return nil, fmt.Errorf("rollout: list feed groups of store %s: %w", s.name, err)
	}
	var names []string
	for _, o := range infos {
		name, _, ok := strings.Cut(strings.TrimPrefix(o.Key, feedDir), "/")
		if ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := []FeedGroup{}
	for _, name := range names {
		g, _, err := s.feedCommit(ctx, name)
		if err != nil {
			return nil, err
		}
		if g != nil {
			out = append(out, *g)
		}
	}
	return out, nil
}

// DeleteFeedGroup forgets a group's position: it starts again at the
// beginning.
func (s *Store) DeleteFeedGroup(ctx context.Context, group string) error {
	if _, err := s.FeedGroup(ctx, group); err != nil {
		return err
	}
	infos, err := s.root.List(ctx, feedDir+group+"/")
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return nil
	}
	// The older commits in one batch, the newest (listed first: names
	// sort newest first) last: until it goes, the group reads as it was,
	// never as an older position.
	keys := make([]string, len(infos))
	for i, o := range infos {
		keys[i] = o.Key
	}
	if err := objstore.DeleteKeys(ctx, s.root, keys[1:]); err != nil {
		return err
	}
	return s.root.Delete(ctx, keys[0])
}
