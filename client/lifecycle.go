package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/lance-context/lance-context/api"
)

// Cleanup removes the store's old base versions and the files only they
// reference; o nil uses the worker's retention.
func (c *Client) Cleanup(ctx context.Context, store string, o *api.CleanupRequest) (*api.CleanupResponse, error) {
	var body []byte
	if o != nil {
		var err error
		if body, err = jsonBody(o); err != nil {
			return nil, err
		}
	}
	var out api.CleanupResponse
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "cleanup"), body: body, contentType: "application/json", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateTag names base version v of the store (0: the latest).
func (c *Client) CreateTag(ctx context.Context, store, name string, v uint64) (*api.Tag, error) {
	body, err := jsonBody(api.TagRequest{Name: name, Version: v})
	if err != nil {
		return nil, err
	}
	var out api.Tag
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "tags"), body: body, contentType: "application/json"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tags lists the store's tags.
func (c *Client) Tags(ctx context.Context, store string) ([]api.Tag, error) {
	var out api.TagsResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "tags"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Tags, nil
}

// DeleteTag removes a tag.
func (c *Client) DeleteTag(ctx context.Context, store, name string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: storePath(store, "tags", url.PathEscape(name))}, nil)
}

// TakeLease keeps base version v (0: the latest) from cleanup for ttl
// seconds (0: an hour).
func (c *Client) TakeLease(ctx context.Context, store string, v uint64, ttlSeconds int64, holder string) (*api.Lease, error) {
	body, err := jsonBody(api.LeaseRequest{Version: v, TTLSeconds: ttlSeconds, Holder: holder})
	if err != nil {
		return nil, err
	}
	var out api.Lease
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "leases"), body: body, contentType: "application/json"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseLease ends a lease.
func (c *Client) ReleaseLease(ctx context.Context, store, id string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: storePath(store, "leases", url.PathEscape(id))}, nil)
}

// Retention returns the store's row retention.
func (c *Client) Retention(ctx context.Context, store string) (*api.RetentionConfig, error) {
	var out api.RetentionConfig
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "retention"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetRetention sets the store's row retention (zero fields: no bound).
func (c *Client) SetRetention(ctx context.Context, store string, r api.RetentionConfig) (*api.RetentionConfig, error) {
	body, err := jsonBody(r)
	if err != nil {
		return nil, err
	}
	var out api.RetentionConfig
	if err := c.call(ctx, request{method: http.MethodPut, path: storePath(store, "retention"), body: body, contentType: "application/json", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
