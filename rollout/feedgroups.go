package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/objstore"
)

// feedDir holds a consumer group's committed position per group, beside
// the table: _lc_feed/{group}.json is the wire type FeedGroup.
const feedDir = "_lc_feed/"

// FeedGroup is a consumer group's committed position.
type FeedGroup = api.FeedGroup

// validGroup checks a consumer group name: a store name's characters.
func validGroup(g string) error {
	if !validName(g) {
		return invalid("consumer group %q: use 1 to 128 of A-Z a-z 0-9 . _ -, not starting with . _ or -", clip(g, 40))
	}
	return nil
}

// CommitFeed records pos as group's position: a consumer that restarts,
// here or in another process, resumes after it. Committing the same
// position again changes nothing but the time; a position may move back
// (to read again), as a Kafka consumer may seek.
func (s *Store) CommitFeed(ctx context.Context, group string, pos Position) (*FeedGroup, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	g := &FeedGroup{Group: group, Position: pos.String(), CommittedAt: s.clockNow().UTC()}
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	if err := s.root.Put(ctx, feedDir+group+".json", b); err != nil {
		return nil, fmt.Errorf("rollout: commit feed group %s of store %s: %w", group, s.name, err)
	}
	return g, nil
}

// FeedGroup returns a group's committed position; ErrNotFound for a group
// that never committed (it starts at the beginning).
func (s *Store) FeedGroup(ctx context.Context, group string) (*FeedGroup, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	b, err := s.root.Get(ctx, feedDir+group+".json")
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: consumer group %s of store %s has committed no position", ErrNotFound, group, s.name)
	}
	if err != nil {
		return nil, err
	}
	var g FeedGroup
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("rollout: consumer group %s of store %s is damaged: %w", group, s.name, err)
	}
	return &g, nil
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
	out := []FeedGroup{}
	for _, o := range infos {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, feedDir), ".json")
		if !ok {
			continue
		}
		g, err := s.FeedGroup(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b FeedGroup) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// DeleteFeedGroup forgets a group's position: it starts again at the
// beginning.
func (s *Store) DeleteFeedGroup(ctx context.Context, group string) error {
	if _, err := s.FeedGroup(ctx, group); err != nil {
		return err
	}
	return s.root.Delete(ctx, feedDir+group+".json")
}
