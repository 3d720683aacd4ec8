package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/lance-context/lance-context/api"
)

// Sample draws a batch of complete groups (every record of n keys inside
// a policy-version window) from the store's all view; see
// api.SampleRequest. With a consumer group (req.Group) the keys served are
// counted in the store, so the call is not retried (a retry after a lost
// answer would be served another batch); without one it is retried like
// a read. A call with no group left answers no groups, not an error.
func (c *Client) Sample(ctx context.Context, store string, req api.SampleRequest) (*api.SampleResponse, error) {
	resp, err := c.sample(ctx, store, req, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.SampleResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("lance-context: sample of %q: decoding the answer: %w", store, err)
	}
	return &out, nil
}

// OpenSampleArrow draws a batch as Sample does and returns it as an Arrow
// IPC stream (read it with arrow/ipc.NewReader; the caller closes it):
// the rows of every group, each group's rows contiguous, groups in draw
// order. The schema's metadata api.SampleMetaGroupRows lists each group's
// row count; the headers api.HeaderSampleGroups, HeaderSampleSeed,
// HeaderSampleVersion and HeaderSampleEligible carry the rest.
func (c *Client) OpenSampleArrow(ctx context.Context, store string, req api.SampleRequest) (io.ReadCloser, http.Header, error) {
	resp, err := c.sample(ctx, store, req, api.ArrowStream)
	if err != nil {
		return nil, nil, err
	}
	return resp.Body, resp.Header, nil
}

func (c *Client) sample(ctx context.Context, store string, req api.SampleRequest, accept string) (*http.Response, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, request{method: http.MethodPost, path: storePath(store, "sample"), body: body,
		contentType: "application/json", accept: accept, idempotent: req.Group == ""})
}
