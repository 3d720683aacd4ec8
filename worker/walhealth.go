package worker

import (
	"fmt"
	"net/http"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/httpapi"
)

// health answers /api/v1/health: "ok", or "degraded" with the stores
// whose shard WAL is corrupt (they refuse writes until repaired; see
// rollout.Damage), whose writes find their disk full (rollout.Full), or
// whose shard another live process with this instance id holds
// (rollout.Conflict). It stays 200 either way: restarting the worker
// would repair none of them, and its other stores are served.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	body := api.Health{Status: "ok", Role: "worker", InstanceID: s.cfg.InstanceID, ShardID: s.catalog.Shard(), Version: buildinfo.Version()}
	body.DamagedStores = s.catalog.Damaged()
	body.StorageFull = s.catalog.Full()
	body.ShardConflicts = s.catalog.Conflicts()
	if len(body.DamagedStores)+len(body.StorageFull)+len(body.ShardConflicts) > 0 {
		body.Status = "degraded"
	}
	httpapi.WriteJSON(w, http.StatusOK, body)
}

// damageRetryAfter is the Retry-After of a write refused for WAL damage:
// only a repair helps, and the store tries its log again this often.
const damageRetryAfter = 30

// refuseDamaged answers writes to a store whose WAL is known to be corrupt
// with 503 WAL_CORRUPT naming the damage, before any body is read. Reads
// and deletes go on: they do not touch the WAL.
func (s *Server) refuseDamaged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if d := s.catalog.DamageOf(httpapi.PathParam(r, "name")); d != nil {
				httpapi.WriteError(w, r, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: api.CodeWALCorrupt, RetryAfter: damageRetryAfter,
					Message: fmt.Sprintf("store %q refuses writes: the WAL of shard %s is corrupt at position %d (%s offset %d: %s); reads go on; repair it with: %s",
						d.Store, d.Shard, d.Position, d.Segment, d.Offset, d.Reason, d.Repair)})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
