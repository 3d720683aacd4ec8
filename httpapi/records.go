package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/rollout"
)

// RecordReads serves the record read routes that the worker API and the
// master's data browser share: a page of records by source and filters,
// one record, its payload, and a trajectory. Routes carry {name} and, per
// route, {id} or {rollout_id}.
type RecordReads struct {
	Catalog       *rollout.Catalog
	MaxLimit      int            // largest page size accepted
	DefaultSource rollout.Source // the source when the request names none
}

func (h RecordReads) store(r *http.Request) (*rollout.Store, error) {
	return h.Catalog.Open(r.Context(), PathParam(r, "name"))
}

// storeAt opens the request's store and reads its version= parameter (a
// base version number or a tag name; absent: 0, the latest): a read at a
// version answers from that base version alone, as a checkout of it would,
// without changing what other readers see.
func (h RecordReads) storeAt(r *http.Request) (*rollout.Store, uint64, error) {
	st, err := h.store(r)
	if err != nil {
		return nil, 0, err
	}
	ref := r.URL.Query().Get("version")
	if ref == "" {
		return st, 0, nil
	}
	v, err := st.ResolveVersion(r.Context(), ref)
	return st, v, err
}

// List serves GET .../records?source=&limit=&offset=&cursor=&filters=&<column>=.
func (h RecordReads) List(w http.ResponseWriter, r *http.Request) {
	st, v, err := h.storeAt(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	o, err := ListQuery(r, h.MaxLimit, h.DefaultSource)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	o.Version = v
	res, err := st.List(r.Context(), o)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	recs := res.Records
	if recs == nil {
		recs = []rollout.Record{}
	}
	writeList(w, api.ListResponse{Records: recs, HasMore: res.HasMore, Limit: o.Limit,
		Offset: o.Offset, Source: o.Source, NextCursor: res.NextCursor})
}

// Get serves GET .../records/{id}: {"record": the newest version, from the
// full union} or {"record": null} when no record has the id (the
// reference's contract: a miss is an answer, not an error).
func (h RecordReads) Get(w http.ResponseWriter, r *http.Request) {
	st, v, err := h.storeAt(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	rec, err := st.GetAt(r.Context(), PathParam(r, "id"), v)
	if err != nil && !(isNotFound(err) && rec == nil) {
		WriteError(w, r, err)
		return
	}
	writeGetRecord(w, rec)
}

// isNotFound reports a missing record (the store exists: it was opened).
func isNotFound(err error) bool { return Classify(err).Status == http.StatusNotFound }

// Blob serves GET .../records/{id}/blob as a download named after the id.
// It streams: an out-of-line payload is read a window at a time, and Range
// requests are answered (206) for resumable downloads of large payloads.
func (h RecordReads) Blob(w http.ResponseWriter, r *http.Request) {
	st, v, err := h.storeAt(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	id := PathParam(r, "id")
	p, err := st.OpenPayload(r.Context(), id, v)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", p.ContentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + ".bin"}))
	if p.Checksum != "" {
		w.Header().Set("ETag", `"sha256-`+p.Checksum+`"`)
	}
	if p.Size > 64<<20 {
		// The server's write timeout is sized for pages, not for a
		// gigabyte over a slow link.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(30 * time.Minute))
	}
	http.ServeContent(w, r, "", p.ModTime, p)
}

// Trajectory serves GET .../trajectories/{rollout_id}: the rollout's
// records in (sequence_order, id) order, from the full union.
func (h RecordReads) Trajectory(w http.ResponseWriter, r *http.Request) {
	st, v, err := h.storeAt(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	id := PathParam(r, "rollout_id")
	recs, err := st.TrajectoryAt(r.Context(), id, v)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if recs == nil {
		recs = []rollout.Record{}
	}
	writeTrajectory(w, id, recs)
}

// ListQuery parses source, limit, offset, cursor and filters of a list
// request. Filters come as query parameters of their own (rollout_id=r1)
// or as one JSON object (filters={"rollout_id":"r1"}, the reference's
// form), or both when they name different columns.
func ListQuery(r *http.Request, maxLimit int, defaultSource rollout.Source) (rollout.ListOptions, error) {
	q := r.URL.Query()
	var o rollout.ListOptions
	var err error
	if q.Get("source") == "" {
		o.Source = defaultSource
	} else if o.Source, err = rollout.ParseSource(q.Get("source")); err != nil {
		return o, err
	}
	if o.Source == "" {
		o.Source = rollout.SourceFragments
	}
	o.Limit = 25
	if v := q.Get("limit"); v != "" {
		if o.Limit, err = strconv.Atoi(v); err != nil || o.Limit < 1 || o.Limit > maxLimit {
			return o, Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "limit must be an integer from 1 to %d, got %q", maxLimit, v)
		}
	}
	if v := q.Get("offset"); v != "" {
		if o.Offset, err = strconv.Atoi(v); err != nil || o.Offset < 0 {
			return o, Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "offset must be a non-negative integer, got %q", v)
		}
	}
	if v := q.Get("cursor"); v != "" {
		if o.After, err = rollout.DecodeCursor(v); err != nil {
			return o, err
		}
	}
	o.Filters, err = QueryFilters(q, "source", "limit", "offset", "cursor", "version")
	return o, err
}

// QueryFilters reads a request's filters: query parameters of their own
// (rollout_id=r1), or one JSON object (filters={"rollout_id":"r1"}, the
// reference's form), or both when they name different columns. Parameters
// named in reserved are the route's own.
func QueryFilters(q url.Values, reserved ...string) ([]rollout.Filter, error) {
	filters := map[string]string{}
	if v := q.Get("filters"); v != "" {
		if err := jsonFilters(v, filters); err != nil {
			return nil, err
		}
	}
	for k, vs := range q {
		if k == "filters" || slices.Contains(reserved, k) {
			continue
		}
		if len(vs) != 1 {
			return nil, Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "filter %q given %d times; give it once", k, len(vs))
		}
		if _, dup := filters[k]; dup {
			return nil, Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "filter %q given both as a parameter and in filters=; give it once", k)
		}
		filters[k] = vs[0]
	}
	return rollout.ParseFilters(filters)
}

// jsonFilters reads filters={"column": value, ...}: strings for text
// columns, true/false for include_in_training, null for no filter.
func jsonFilters(raw string, into map[string]string) error {
	if _, err := CheckJSON([]byte(raw), 0, nil); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return err
		}
		return Errorf(e.Status, e.Code, "filters: %s", strings.Replace(e.Message, "of the body", "of filters", 1))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			`filters must be a JSON object of column to value, e.g. filters={"rollout_id":"r1"}: %v`, err)
	}
	for k, v := range m {
		if !slices.Contains(api.FilterColumns, k) {
			return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "cannot filter on %q; filters: %s", k, strings.Join(api.FilterColumns, ", "))
		}
		var val any
		_ = json.Unmarshal(v, &val)
		switch x := val.(type) {
		case nil:
			continue
		case string:
			if k == "include_in_training" {
				return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "filters: include_in_training must be true or false, got the string %s", v)
			}
			into[k] = x
		case bool:
			if k != "include_in_training" {
				return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "filters: %s must be a string, got %s", k, v)
			}
			into[k] = strconv.FormatBool(x)
		default:
			want := "a string"
			if k == "include_in_training" {
				want = "true or false"
			}
			return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "filters: %s must be %s, got %s", k, want, jsonKind(v))
		}
	}
	return nil
}

// jsonKind names the JSON type of a value, for messages.
func jsonKind(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "invalid JSON"
	}
	switch x.(type) {
	case float64:
		return fmt.Sprintf("the number %s", v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return string(v)
}
