package httpe2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// The reference system's client (RemoteRolloutStore over ContextClient)
// and DTOs, as the wire sees them: these types mirror the fields it
// reads, with its types, so a response it could not decode fails here.
type (
	refStoreInfo struct {
		Name    string  `json:"name"`
		URI     string  `json:"uri"`
		Version *uint64 `json:"version"`
	}
	refListStores struct {
		Stores []refStoreInfo `json:"stores"`
	}
	refAddResponse struct {
		Version *uint64  `json:"version"`
		IDs     []string `json:"ids"`
		Count   *uint64  `json:"count"`
	}
	refRecord struct {
		ID                string          `json:"id"`
		RolloutID         string          `json:"rollout_id"`
		ProblemID         string          `json:"problem_id"`
		Dataset           *string         `json:"dataset"`
		SequenceOrder     int32           `json:"sequence_order"`
		Role              string          `json:"role"`
		CreatedAt         time.Time       `json:"created_at"`
		Content           *string         `json:"content"`
		ContentType       string          `json:"content_type"`
		OutputTokens      []int32         `json:"output_tokens"`
		OutputLogprobs    []float32       `json:"output_logprobs"`
		LossMask          []int8          `json:"loss_mask"`
		Reward            *float32        `json:"reward"`
		IncludeInTraining *bool           `json:"include_in_training"`
		PolicyVersion     *string         `json:"policy_version"`
		Relationships     []refRelation   `json:"relationships"`
		BinaryPayload     *string         `json:"binary_payload"`
		PayloadSize       *int64          `json:"payload_size"`
		PayloadChecksum   *string         `json:"payload_checksum"`
		ArtifactType      *string         `json:"artifact_type"`
		Metadata          json.RawMessage `json:"metadata"`
	}
	refRelation struct {
		TargetID string   `json:"target_id"`
		Relation string   `json:"relation"`
		Weight   *float32 `json:"weight"`
	}
	refGet struct {
		Record *refRecord `json:"record"`
	}
	refList struct {
		Records []refRecord `json:"records"`
	}
	refVersion struct {
		Version *uint64 `json:"version"`
	}
	refCompact struct {
		FragmentsRemoved *uint64 `json:"fragments_removed"`
		FragmentsAdded   *uint64 `json:"fragments_added"`
		FilesRemoved     *uint64 `json:"files_removed"`
		FilesAdded       *uint64 `json:"files_added"`
	}
	refCompactStats struct {
		TotalFragments   *uint64    `json:"total_fragments"`
		IsCompacting     *bool      `json:"is_compacting"`
		LastCompaction   *time.Time `json:"last_compaction"`
		LastError        *string    `json:"last_error"`
		TotalCompactions *uint64    `json:"total_compactions"`
	}
	refError struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// decodeAs decodes a reply the way serde does for the reference's DTOs:
// unknown fields ignored, types strict.
func decodeAs[T any](t *testing.T, r *response, want int, what string) T {
	t.Helper()
	var v T
	if r.Status != want {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, want, r.Body)
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%s: the reference client could not decode %s: %v", what, r.Body, err)
	}
	return v
}

// refError checks the reference's error envelope and code spelling.
func expectRefError(t *testing.T, r *response, status int, code, what string) {
	t.Helper()
	e := decodeAs[refError](t, r, status, what)
	if e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("%s: error %+v, want code %s and a message", what, e.Error, code)
	}
}

// TestReferenceClientConformance replays, route by route, the requests the
// reference client builds (create with storage_options, connect, add as
// JSON and as multipart, get, list with filters=, blob, checkout, compact,
// compact stats, delete) against a real worker, and decodes every answer
// with the reference DTOs' fields and types.
func TestReferenceClientConformance(t *testing.T) {
	// The reference's appends are readable after the flush sweeper runs.
	w := startWorker(t, t.TempDir(), map[string]string{"ROLLOUT_FLUSH_INTERVAL_SECS": "1"})
	c := newClient(t, w)
	const store = "ref-exp"

	// connect_or_create: GET the store (404), then create it.
	expectRefError(t, c.do("GET", "/api/v1/rollouts/"+store, "", nil), 404, "NOT_FOUND", "get before create")
	info := decodeAs[refStoreInfo](t, c.do("POST", "/api/v1/rollouts", "application/json",
		[]byte(`{"name":"`+store+`","storage_options":null}`)), 201, "create")
	if info.Name != store || info.URI == "" || info.Version == nil {
		t.Fatalf("create: %+v", info)
	}
	expectRefError(t, c.do("POST", "/api/v1/rollouts", "application/json", []byte(`{"name":"`+store+`","storage_options":{}}`)), 409, "ALREADY_EXISTS", "second create")
	info = decodeAs[refStoreInfo](t, c.do("GET", "/api/v1/rollouts/"+store, "", nil), 200, "connect")
	if info.Name != store || info.Version == nil || *info.Version == 0 {
		t.Fatalf("connect: %+v", info)
	}
	stores := decodeAs[refListStores](t, c.do("GET", "/api/v1/rollouts", "", nil), 200, "list stores")
	if len(stores.Stores) != 1 || stores.Stores[0].Name != store || stores.Stores[0].URI != info.URI {
		t.Fatalf("list stores: %+v", stores)
	}

	// add_rollouts without a payload: a JSON body, every record with an id.
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	records := []map[string]any{
		{"id": "t1-0", "rollout_id": "t1", "sequence_order": 0, "role": "user", "created_at": created, "content": "2+2?", "content_type": "text/plain"},
		{"id": "t1-1", "rollout_id": "t1", "problem_id": "p1", "sequence_order": 1, "role": "assistant", "content": "4",
			"output_tokens": []int{19}, "output_logprobs": []float32{-0.25}, "loss_mask": []int{1}, "reward": 1.0,
			"include_in_training": true, "policy_version": "v7", "metadata": map[string]any{"temperature": 0.7, "tags": []string{"a"}},
			"relationships": []map[string]any{{"target_id": "t1-0", "relation": "replies_to"}}},
		{"id": "t2-0", "rollout_id": "t2", "sequence_order": 0, "role": "critic", "content": "free-form role"},
	}
	body, _ := json.Marshal(map[string]any{"records": records})
	add := decodeAs[refAddResponse](t, c.do("POST", "/api/v1/rollouts/"+store+"/records", "application/json", body), 201, "add json")
	if add.Version == nil || add.Count == nil || *add.Count != 3 || !reflect.DeepEqual(add.IDs, []string{"t1-0", "t1-1", "t2-0"}) {
		t.Fatalf("add: %+v", add)
	}

	// add_rollouts with a payload: multipart, "metadata" first, then a part
	// named by the record's index.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	meta, _ := json.Marshal(map[string]any{"records": []map[string]any{
		{"id": "art-0", "rollout_id": "t1", "sequence_order": 2, "role": "artifact", "content_type": "image/png", "artifact_type": "screenshot", "payload_size": 4, "binary_payload": nil},
	}})
	_ = mw.WriteField("metadata", string(meta))
	part, _ := mw.CreateFormFile("0", "blob")
	_, _ = part.Write([]byte{0x89, 'P', 'N', 'G'})
	_ = mw.Close()
	add = decodeAs[refAddResponse](t, c.do("POST", "/api/v1/rollouts/"+store+"/records", mw.FormDataContentType(), mp.Bytes()), 201, "add multipart")
	if add.Count == nil || *add.Count != 1 || add.IDs[0] != "art-0" {
		t.Fatalf("add multipart: %+v", add)
	}

	// get: {"record": ...} once the sweeper sealed it; {"record": null} for
	// an id no record has.
	var got refGet
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = decodeAs[refGet](t, c.do("GET", "/api/v1/rollouts/"+store+"/records/t1-1", "", nil), 200, "get")
		if got.Record != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := got.Record
	if r == nil {
		t.Fatal("get t1-1: still {record: null} after the flush interval")
	}
	var md map[string]any
	if r.ID != "t1-1" || r.ProblemID != "p1" || r.SequenceOrder != 1 || r.Role != "assistant" || r.ContentType != "text/plain" ||
		r.CreatedAt.IsZero() || r.Reward == nil || *r.Reward != 1 || r.PolicyVersion == nil || *r.PolicyVersion != "v7" ||
		len(r.Relationships) != 1 || r.Relationships[0].TargetID != "t1-0" || json.Unmarshal(r.Metadata, &md) != nil || md["temperature"] != 0.7 {
		t.Fatalf("get t1-1: %+v (metadata %s)", r, r.Metadata)
	}
	if g := decodeAs[refGet](t, c.do("GET", "/api/v1/rollouts/"+store+"/records/t1-0", "", nil), 200, "get t1-0"); g.Record == nil || !g.Record.CreatedAt.Equal(created) || g.Record.ProblemID != "t1" {
		t.Fatalf("get t1-0: %+v", g.Record)
	}
	if g := decodeAs[map[string]json.RawMessage](t, c.do("GET", "/api/v1/rollouts/"+store+"/records/nope", "", nil), 200, "get missing"); string(g["record"]) != "null" {
		t.Fatalf("get missing: %v", g)
	}

	// list and list_filtered: limit, offset and filters=<JSON object>.
	list := decodeAs[refList](t, c.do("GET", "/api/v1/rollouts/"+store+"/records?limit=10&offset=0", "", nil), 200, "list")
	if len(list.Records) != 4 {
		t.Fatalf("list: %d records", len(list.Records))
	}
	for _, rec := range list.Records {
		if rec.BinaryPayload != nil {
			t.Fatalf("list returned the payload of %s", rec.ID)
		}
	}
	filters, _ := json.Marshal(map[string]any{"rollout_id": "t1", "include_in_training": true})
	list = decodeAs[refList](t, c.do("GET", "/api/v1/rollouts/"+store+"/records?filters="+url.QueryEscape(string(filters)), "", nil), 200, "list filtered")
	if len(list.Records) != 1 || list.Records[0].ID != "t1-1" {
		t.Fatalf("list filtered: %+v", list.Records)
	}
	list = decodeAs[refList](t, c.do("GET", "/api/v1/rollouts/"+store+"/records?limit=2&offset=2&filters="+url.QueryEscape(`{"rollout_id":"t1"}`), "", nil), 200, "list filtered page")
	if len(list.Records) != 1 {
		t.Fatalf("list filtered page: %+v", list.Records)
	}

	// fetch_rollout_blob: the bytes, or 404 (None).
	b := c.do("GET", "/api/v1/rollouts/"+store+"/records/art-0/blob", "", nil)
	if b.Status != 200 || !bytes.Equal(b.Body, []byte{0x89, 'P', 'N', 'G'}) {
		t.Fatalf("blob: %d %q", b.Status, b.Body)
	}
	if b := c.do("GET", "/api/v1/rollouts/"+store+"/records/t1-0/blob", "", nil); b.Status != 404 {
		t.Fatalf("blob of a record without payload: %d", b.Status)
	}

	// Merge (ours), then checkout the version before it: reads see the base
	// as it was, without the WAL; checking out the latest unpins.
	before := decodeAs[refStoreInfo](t, c.do("GET", "/api/v1/rollouts/"+store, "", nil), 200, "info before merge")
	c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/"+store+"/merge", "", nil), "merge")
	after := decodeAs[refStoreInfo](t, c.do("GET", "/api/v1/rollouts/"+store, "", nil), 200, "info after merge")
	if *after.Version <= *before.Version {
		t.Fatalf("merge did not advance the version: %d -> %d", *before.Version, *after.Version)
	}
	v := decodeAs[refVersion](t, c.do("POST", "/api/v1/rollouts/"+store+"/checkout", "application/json", []byte(fmt.Sprintf(`{"version":%d}`, *before.Version))), 200, "checkout")
	if v.Version == nil || *v.Version != *before.Version {
		t.Fatalf("checkout: %+v", v)
	}
	if list := decodeAs[refList](t, c.do("GET", "/api/v1/rollouts/"+store+"/records", "", nil), 200, "list pinned"); len(list.Records) != 0 {
		t.Fatalf("pinned to the empty base version, list shows %d records", len(list.Records))
	}
	decodeAs[refVersion](t, c.do("POST", "/api/v1/rollouts/"+store+"/checkout", "application/json", []byte(fmt.Sprintf(`{"version":%d}`, *after.Version))), 200, "checkout latest")
	if list := decodeAs[refList](t, c.do("GET", "/api/v1/rollouts/"+store+"/records", "", nil), 200, "list unpinned"); len(list.Records) != 4 {
		t.Fatalf("unpinned list: %d records", len(list.Records))
	}

	// A second fragment to compact, appended as Python's urlencode spells
	// flush ("flush=True").
	c.must(http.StatusCreated, c.appendJSON(store, "?flush=True", rec("t3-0", "t3")), "append flush=True")
	c.must(http.StatusOK, c.do("POST", "/api/v1/rollouts/"+store+"/merge", "", nil), "second merge")

	// compact (with the reference's options) and compact stats.
	comp := decodeAs[refCompact](t, c.do("POST", "/api/v1/rollouts/"+store+"/compact", "application/json", []byte(`{"target_rows_per_fragment":1000,"materialize_deletions":true}`)), 200, "compact")
	if comp.FragmentsRemoved == nil || *comp.FragmentsRemoved != 2 || comp.FragmentsAdded == nil || *comp.FragmentsAdded != 1 || comp.FilesRemoved == nil || comp.FilesAdded == nil {
		t.Fatalf("compact: %+v", comp)
	}
	stats := decodeAs[refCompactStats](t, c.do("GET", "/api/v1/rollouts/"+store+"/compact/stats", "", nil), 200, "compact stats")
	if stats.TotalFragments == nil || *stats.TotalFragments == 0 || stats.IsCompacting == nil || *stats.IsCompacting || stats.TotalCompactions == nil || stats.LastCompaction == nil {
		t.Fatalf("compact stats: %+v", stats)
	}
	expectRefError(t, c.do("POST", "/api/v1/rollouts/"+store+"/checkout", "application/json", []byte(`{"version":"x"}`)), 400, "INVALID_REQUEST", "bad checkout")

	// delete_rollout_store, then the store is gone.
	if d := c.do("DELETE", "/api/v1/rollouts/"+store, "", nil); d.Status/100 != 2 {
		t.Fatalf("delete: %d %s", d.Status, d.Body)
	}
	expectRefError(t, c.do("GET", "/api/v1/rollouts/"+store, "", nil), 404, "NOT_FOUND", "get after delete")
}
