package worker

import (
	"mime"
	"net/http"
	"strconv"

	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// RecordReads serves the record read routes that the worker API and the
// master's data browser share: a page of records by source and filters, one
// record, and its payload. Routes carry {name} and, for Get and Blob, {id}.
type RecordReads struct {
	Catalog  *rollout.Catalog
	MaxLimit int // largest page size accepted
}

func (h RecordReads) store(r *http.Request) (*rollout.Store, error) {
	return h.Catalog.Open(r.Context(), httpapi.PathParam(r, "name"))
}

// List serves GET .../records?source=&limit=&offset=&<filters>.
func (h RecordReads) List(w http.ResponseWriter, r *http.Request) {
	st, err := h.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	o, err := ListQuery(r, h.MaxLimit)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	res, err := st.List(r.Context(), o)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	recs := res.Records
	if recs == nil {
		recs = []rollout.Record{}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"records": recs, "has_more": res.HasMore, "limit": o.Limit, "offset": o.Offset, "source": o.Source})
}

// Get serves GET .../records/{id}: the newest version, from the full union.
func (h RecordReads) Get(w http.ResponseWriter, r *http.Request) {
	st, err := h.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	rec, err := st.Get(r.Context(), httpapi.PathParam(r, "id"))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, rec)
}

// Blob serves GET .../records/{id}/blob as a download named after the id.
func (h RecordReads) Blob(w http.ResponseWriter, r *http.Request) {
	st, err := h.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	id := httpapi.PathParam(r, "id")
	data, ctype, err := st.Blob(r.Context(), id)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + ".bin"}))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
