package worker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// The feed's limits: rows per answer (JSON forms, Arrow) and the longest
// wait of one request.
const (
	feedMaxJSON  = 10_000
	feedMaxArrow = 1_000_000
	feedMaxWait  = 60 * time.Second
	// feedHeartbeat is how often a streaming feed writes something while
	// no row comes, so proxies and clients see the connection alive.
	feedHeartbeat = 15 * time.Second
)

// feed kinds, by the request's Accept.
const (
	feedJSON   = "json"
	feedNDJSON = "ndjson"
	feedSSE    = "sse"
	feedArrow  = "arrow"
)

const (
	ndjsonType = "application/x-ndjson"
	sseType    = "text/event-stream"
)

// feedKind picks the encoding from Accept: an Arrow stream, JSON lines or
// Server-Sent Events (both streaming), else one JSON object.
func feedKind(r *http.Request) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		switch strings.ToLower(mt) {
		case api.ArrowStream:
			return feedArrow
		case ndjsonType, "application/jsonl", "application/json-lines":
			return feedNDJSON
		case sseType:
			return feedSSE
		}
	}
	return feedJSON
}

// feedRequest parses a feed read: group, position, limit, wait_ms and
// filters (any other parameter, as the records listing takes them).
func (s *Server) feedRequest(r *http.Request, st *rollout.Store, kind string) (group string, o rollout.FeedOptions, err error) {
	q := r.URL.Query()
	group = q.Get("group")
	maxLimit := feedMaxJSON
	if kind == feedArrow {
		maxLimit = feedMaxArrow
	}
	o.Limit = 100
	if v := q.Get("limit"); v != "" {
		if o.Limit, err = strconv.Atoi(v); err != nil || o.Limit < 1 || o.Limit > maxLimit {
			return "", o, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "limit must be an integer from 1 to %d, got %q", maxLimit, v)
		}
	}
	if v := q.Get("wait_ms"); v != "" {
		ms, perr := strconv.Atoi(v)
		if perr != nil || ms < 0 || time.Duration(ms)*time.Millisecond > feedMaxWait {
			return "", o, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "wait_ms must be an integer from 0 to %d, got %q", feedMaxWait.Milliseconds(), v)
		}
		o.Wait = time.Duration(ms) * time.Millisecond
	}
	if o.Filters, err = httpapi.QueryFilters(q, "group", "position", "limit", "wait_ms", "columns"); err != nil {
		return "", o, err
	}
	if v := q.Get("columns"); v != "" {
		o.Columns = strings.Split(v, ",")
		if _, err = rollout.FeedColumns(o.Columns); err != nil {
			return "", o, err
		}
	}
	if q.Has("position") {
		o.After, err = rollout.ParsePosition(q.Get("position"))
	} else if group != "" {
		o.After, err = st.FeedGroupPosition(r.Context(), group)
	}
	return group, o, err
}

// feed reads rows after a position: GET .../feed.
func (s *Server) feed(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	kind := feedKind(r)
	group, o, err := s.feedRequest(r, st, kind)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	switch kind {
	case feedNDJSON, feedSSE:
		s.feedStream(w, r, st, kind, group, o)
		return
	}
	res, err := st.Feed(r.Context(), o)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	defer res.Release()
	if kind == feedArrow {
		writeFeedArrow(w, r, res)
		return
	}
	body, err := feedBody(res, group)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, body)
}

func feedBody(res *rollout.FeedResult, group string) (*api.FeedResponse, error) {
	recs, err := res.Records()
	if err != nil {
		return nil, err
	}
	return &api.FeedResponse{Records: recs, Position: res.Position.String(), Count: len(recs), Group: group}, nil
}

// writeFeedArrow writes an answer as an Arrow IPC stream (the schema of
// the records listing plus lc_shard and lc_seq), with the position after
// it in a header and in the schema's metadata.
func writeFeedArrow(w http.ResponseWriter, r *http.Request, res *rollout.FeedResult) {
	pos := res.Position.String()
	schema := rollout.FeedSchema(res.Columns, arrow.NewMetadata([]string{api.FeedPositionKey}, []string{pos}))
	w.Header().Set("Content-Type", api.ArrowStream)
	w.Header().Set(api.FeedPositionHeader, pos)
	w.Header().Set("X-Feed-Rows", strconv.Itoa(res.Rows))
	bw := bufio.NewWriterSize(w, 1<<20)
	iw := ipc.NewWriter(bw, ipc.WithSchema(schema))
	for _, b := range res.Batches {
		rec := array.NewRecordBatch(schema, b.Columns(), b.NumRows())
		err := iw.Write(rec)
		rec.Release()
		if err != nil {
			panic(http.ErrAbortHandler) // the client sees a cut stream, never a short one

		}
	}
	if err := iw.Close(); err == nil {
		_ = bw.Flush()
	}
}

// feedStream follows the feed for as long as the client stays: one line
// (NDJSON) or event (SSE) per answer, each {"records","position","count"},
// and an empty one every feedHeartbeat without rows. Positions are not
// committed: the consumer commits what it has processed.
func (s *Server) feedStream(w http.ResponseWriter, r *http.Request, st *rollout.Store, kind, group string, o rollout.FeedOptions) {
	// Through the middleware's wrappers (they unwrap): the writer itself
	// may not be an http.Flusher.
	rc := http.NewResponseController(w)
	if kind == feedSSE {
		w.Header().Set("Content-Type", sseType)
	} else {
		w.Header().Set("Content-Type", ndjsonType)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	ctx := r.Context()
	wait := feedHeartbeat
	if o.Wait > 0 && o.Wait < wait {
		wait = o.Wait
	}
	for ctx.Err() == nil {
		// A streaming response outlives the server's write timeout.
		_ = rc.SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
		o.Wait = wait
		res, err := st.Feed(ctx, o)
		if err != nil {
			if ctx.Err() == nil {
				s.writeStreamError(w, kind, err)
			}
			return
		}
		body, err := feedBody(res, group)
		res.Release()
		if err != nil {
			s.writeStreamError(w, kind, err)
			return
		}
		if ctx.Err() != nil {
			return // the client left: what it did not get is not lost (nothing is committed)
		}
		o.After = res.Position
		if err := writeStreamItem(w, kind, "records", body); err != nil || rc.Flush() != nil {
			return
		}
	}
}

func writeStreamItem(w http.ResponseWriter, kind, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if kind == feedSSE {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeStreamError ends a stream with the error's body as its last item
// (the status line is long gone).
func (s *Server) writeStreamError(w http.ResponseWriter, kind string, err error) {
	e := httpapi.Classify(err)
	s.log.Warn("worker: feed stream ended by an error", "status", e.Status, "err", err)
	_ = writeStreamItem(w, kind, "error", api.ErrorResponse{Error: api.ErrorBody{Code: e.Code, Message: e.Message}})
}

// commitFeed records a consumer group's position: POST .../feed/commit.
func (s *Server) commitFeed(w http.ResponseWriter, r *http.Request) {
	var body api.FeedCommitRequest
	st := s.storeFor(w, r, &body, true)
	if st == nil {
		return
	}
	if body.Group == "" {
		httpapi.WriteError(w, r, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, `group is required: {"group": "learners", "position": "<a feed answer's position>"}`))
		return
	}
	pos, err := rollout.ParsePosition(body.Position)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	g, err := st.CommitFeed(r.Context(), body.Group, pos)
	writeResult(w, r, http.StatusOK, g, err)
}

// feedGroups lists the consumer groups: GET .../feed/groups.
func (s *Server) feedGroups(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	gs, err := st.FeedGroups(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.FeedGroupsResponse{Groups: gs})
}

// feedGroup reads one group's position: GET .../feed/groups/{group}.
func (s *Server) feedGroup(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	g, err := st.FeedGroup(r.Context(), httpapi.PathParam(r, "group"))
	writeResult(w, r, http.StatusOK, g, err)
}

// deleteFeedGroup forgets a group's position: DELETE .../feed/groups/{group}.
func (s *Server) deleteFeedGroup(w http.ResponseWriter, r *http.Request) {
	st := s.storeFor(w, r, nil, false)
	if st == nil {
		return
	}
	err := st.DeleteFeedGroup(r.Context(), httpapi.PathParam(r, "group"))
	writeResult(w, r, http.StatusNoContent, nil, err)
}
