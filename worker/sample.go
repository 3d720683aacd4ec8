package worker

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// sample answers POST /rollouts/{name}/sample (api.SampleRequest): a batch
// of complete groups as JSON, or as an Arrow IPC stream when the request
// accepts api.ArrowStream (rows of every group, contiguous, in draw order;
// see api.HeaderSampleGroups and api.SampleMetaGroupRows).
func (s *Server) sample(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var body api.SampleRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, 1<<20), r.ContentLength, &body); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	res, err := st.Sample(r.Context(), body)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	defer res.Release()
	if sampleWantsArrow(r) {
		h := w.Header()
		h.Set("Content-Type", api.ArrowStream)
		h.Set(api.HeaderSampleGroups, strconv.Itoa(len(res.Groups)))
		h.Set(api.HeaderSampleEligible, strconv.Itoa(res.Eligible))
		h.Set(api.HeaderSampleSeed, strconv.FormatUint(res.Seed, 10))
		h.Set(api.HeaderSampleVersion, strconv.FormatUint(res.Version, 10))
		iw := ipc.NewWriter(w, ipc.WithSchema(res.Batch.Schema()))
		err := iw.Write(res.Batch)
		if cerr := iw.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			// The groups are counted as served: the client sees a torn
			// stream, not a smaller batch presented as whole.
			s.log.Warn("sample: write arrow", "store", st.Name(), "err", err)
		}
		return
	}
	out, err := sampleResponse(res)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// sampleResponse is a drawn batch in the wire's terms.
func sampleResponse(res *rollout.SampleResult) (*api.SampleResponse, error) {
	recs, err := res.Records()
	if err != nil {
		return nil, err
	}
	out := &api.SampleResponse{Groups: make([]api.SampleGroup, len(res.Groups)), Count: len(res.Groups),
		Rows: int(res.Batch.NumRows()), Eligible: res.Eligible, Window: res.Window, Seed: res.Seed, Version: res.Version}
	for i, g := range res.Groups {
		out.Groups[i] = api.SampleGroup{Key: g.Key, Records: recs[i], RewardMean: finite(g.RewardMean), RewardStd: finite(g.RewardStd)}
	}
	return out, nil
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// sampleWantsArrow reports whether the request's Accept names api.ArrowStream.
func sampleWantsArrow(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), api.ArrowStream) {
			return true
		}
	}
	return false
}
