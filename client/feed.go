package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/lance-context/lance-context/api"
)

// FeedOptions selects a feed read: after Position when it is set, else
// after Group's committed position (a new group starts at the beginning).
type FeedOptions struct {
	Group    string
	Position string
	Limit    int               // rows; 0: the server's default (100)
	WaitMS   int               // wait up to this long for a row (long poll)
	Filters  map[string]string // column -> value, as the records listing takes them
}

func (o FeedOptions) query() url.Values {
	q := url.Values{}
	for k, v := range o.Filters {
		q.Set(k, v)
	}
	if o.Group != "" {
		q.Set("group", o.Group)
	}
	if o.Position != "" {
		q.Set("position", o.Position)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.WaitMS > 0 {
		q.Set("wait_ms", strconv.Itoa(o.WaitMS))
	}
	return q
}

// Feed reads the rows after a position, each once, in the order they
// became durable per shard. Reading commits nothing: CommitFeed does.
func (c *Client) Feed(ctx context.Context, store string, o FeedOptions) (*api.FeedResponse, error) {
	var out api.FeedResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "feed"), query: o.query(), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CommitFeed records group's position (idempotent).
func (c *Client) CommitFeed(ctx context.Context, store, group, position string) (*api.FeedGroup, error) {
	body, err := jsonBody(api.FeedCommitRequest{Group: group, Position: position})
	if err != nil {
		return nil, err
	}
	var out api.FeedGroup
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "feed", "commit"), body: body, contentType: "application/json", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FeedGroups lists the consumer groups with a committed position.
func (c *Client) FeedGroups(ctx context.Context, store string) ([]api.FeedGroup, error) {
	var out api.FeedGroupsResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "feed", "groups"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

// DeleteFeedGroup forgets a group's position.
func (c *Client) DeleteFeedGroup(ctx context.Context, store, group string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: storePath(store, "feed", "groups", url.PathEscape(group)), idempotent: true}, nil)
}
