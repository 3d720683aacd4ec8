package master

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
)

// workerMetricsTimeout bounds the read of one worker's /metrics: a slow
// worker is reported with an error, and never holds the answer up.
const workerMetricsTimeout = 3 * time.Second

// workerStorage answers GET /api/v1/workers/storage: each live worker's
// storage metrics (WAL put and sync latency, seals, fenced and failed
// writers, pending generations, unsealed rows), read from its /metrics
// so the UI can show them beside a store's statistics.
func (m *Master) workerStorage(w http.ResponseWriter, r *http.Request) {
	ws, err := m.coord.ListWorkers(r.Context())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := api.WorkerStorageList{Workers: make([]api.WorkerStorage, len(ws))}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, wi := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out.Workers[i] = m.scrapeWorker(r.Context(), wi)
		}()
	}
	wg.Wait()
	sort.Slice(out.Workers, func(i, j int) bool { return out.Workers[i].InstanceID < out.Workers[j].InstanceID })
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (m *Master) scrapeWorker(ctx context.Context, wi coord.WorkerInfo) api.WorkerStorage {
	s := api.WorkerStorage{InstanceID: wi.InstanceID, ShardID: wi.ShardID, Endpoint: wi.Endpoint, Seals: map[string]int64{}}
	ctx, cancel := context.WithTimeout(ctx, workerMetricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(wi.Endpoint, "/")+"/metrics", nil)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	if m.cfg.APIToken != "" {
		req.Header.Set("Authorization", "Bearer "+m.cfg.APIToken) // a worker's /metrics is behind its token
	}
	resp, err := m.http.Do(req)
	if err != nil {
		s.Error = fmt.Sprintf("read metrics: %v", err)
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.Error = fmt.Sprintf("read metrics: HTTP %d", resp.StatusCode)
		return s
	}
	if err := parseWALMetrics(io.LimitReader(resp.Body, 8<<20), &s); err != nil {
		s.Error = fmt.Sprintf("parse metrics: %v", err)
	}
	return s
}

// parseWALMetrics reads the lance_context_wal_* samples of a Prometheus
// text exposition into s. Other samples are skipped.
func parseWALMetrics(r io.Reader, s *api.WorkerStorage) error {
	const prefix = "lance_context_wal_"
	sums := map[string]float64{}
	counts := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// Two of the WAL's metrics carry the reference's names.
		switch {
		case strings.HasPrefix(line, "rollout_wal_pending_generations"):
			line = prefix + "pending_generations" + strings.TrimPrefix(line, "rollout_wal_pending_generations")
		case strings.HasPrefix(line, "rollout_records_appended_total"):
			line = prefix + "entry_rows_total" + strings.TrimPrefix(line, "rollout_records_appended_total")
		}
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		name, labels, value, ok := sample(line)
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, prefix)
		n := int64(math.Round(value))
		switch name {
		case "put_seconds_sum", "sync_seconds_sum", "seal_seconds_sum":
			sums[strings.TrimSuffix(name, "_sum")] = value
		case "put_seconds_count", "sync_seconds_count", "seal_seconds_count":
			counts[strings.TrimSuffix(name, "_count")] = value
		case "seals_total":
			if cause := label(labels, "cause"); cause != "" {
				s.Seals[cause] += n
			}
		case "writers_fenced_total":
			s.FencedWriters = n
		case "writers_failed_total":
			s.FailedWriters = n
		case "replay_corruptions_total":
			s.ReplayCorruptions = n
		case "pending_generations":
			s.PendingGenerations = n
		case "unsealed_rows":
			s.UnsealedRows = n
		case "entry_rows_total":
			s.EntryRowsTotal = n
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	meanMS := func(k string) float64 {
		if counts[k] == 0 {
			return 0
		}
		return sums[k] / counts[k] * 1000
	}
	s.WALPuts, s.WALPutMeanMS = int64(counts["put_seconds"]), meanMS("put_seconds")
	s.WALSyncs, s.WALSyncMeanMS = int64(counts["sync_seconds"]), meanMS("sync_seconds")
	s.SealMeanMS = meanMS("seal_seconds")
	return nil
}

// sample splits a text-format sample line: name{labels} value [timestamp].
func sample(line string) (name, labels string, value float64, ok bool) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", "", 0, false
		}
		name, labels, rest = line[:i], line[i+1:j], line[j+1:]
	} else {
		sp := strings.IndexByte(line, ' ')
		if sp < 0 {
			return "", "", 0, false
		}
		name, rest = line[:sp], line[sp:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(v) {
		return "", "", 0, false
	}
	return name, labels, v, true
}

// label returns the value of one label of a sample's label set.
func label(labels, key string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == key {
			if u, err := strconv.Unquote(strings.TrimSpace(v)); err == nil {
				return u
			}
		}
	}
	return ""
}
