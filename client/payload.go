package client

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"time"

	"github.com/lance-context/lance-context/api"
)

// AppendPayload appends one record with a payload of any size, streamed
// as a multipart part: the worker stores a payload larger than its inline
// size (LC_BLOB_INLINE_BYTES) as an object of its own, up to
// LC_MAX_BLOB_BYTES (1 GiB by default), and fills in payload_size and
// payload_checksum. Neither side holds the payload whole in memory. The
// payload is read from its start for each attempt, so a retry after a
// transient failure sends it again; the record gets its id and created_at
// before the first attempt, so a retry writes the same row.
func (c *Client) AppendPayload(ctx context.Context, store string, rec api.Record, payload io.ReadSeeker, o AppendOptions) (*AppendResult, error) {
	if rec.ID == "" {
		rec.ID = newID()
	}
	if rec.CreatedAt == nil {
		now := time.Now().UTC().Truncate(time.Microsecond)
		rec.CreatedAt = &now
	}
	meta, err := jsonBody(api.AppendRequest{Records: []api.Record{rec}})
	if err != nil {
		return nil, err
	}
	boundary := multipart.NewWriter(io.Discard).Boundary()
	rq := request{method: http.MethodPost, path: storePath(store, "records"), idempotent: true,
		contentType: "multipart/form-data; boundary=" + boundary}
	var prev chan struct{} // the last attempt's writer, done
	rq.open = func() (io.Reader, error) {
		if prev != nil {
			// The transport closed that attempt's body, so its writer
			// ends at its next write: wait, not to read the payload twice
			// at once.
			<-prev
		}
		if _, err := payload.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("lance-context: rewinding the payload: %w", err)
		}
		pr, pw := io.Pipe()
		done := make(chan struct{})
		prev = done
		go func() {
			defer close(done)
			mw := multipart.NewWriter(pw)
			_ = mw.SetBoundary(boundary)
			err := func() error {
				part, err := mw.CreateFormField("metadata")
				if err == nil {
					_, err = part.Write(meta)
				}
				if err == nil {
					part, err = mw.CreateFormFile("0", rec.ID)
				}
				if err == nil {
					_, err = io.Copy(part, payload)
				}
				if err == nil {
					err = mw.Close()
				}
				return err
			}()
			pw.CloseWithError(err)
		}()
		return pr, nil
	}
	if o.Flush {
		rq.query = url.Values{"flush": {"true"}}
	}
	var out AppendResult
	if err := c.call(ctx, rq, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
