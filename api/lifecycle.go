package api

import "time"

// CleanupRequest is the body of POST /api/v1/rollouts/{name}/cleanup.
type CleanupRequest struct {
	// OlderThanSeconds: versions committed less than this long ago are
	// kept; 0 keeps only the latest and what tags, pins and leases hold
	// (and versions superseded within the read grace). Default: the
	// deployment's LC_CLEANUP_OLDER_THAN_SECS.
	OlderThanSeconds *int64 `json:"older_than_seconds,omitempty"`
	// ReadGraceSeconds keeps versions superseded this recently, for reads
	// that opened them (default LC_CLEANUP_READ_GRACE_SECS).
	ReadGraceSeconds *int64 `json:"read_grace_seconds,omitempty"`
	// DeleteUnverified removes files no version references however young
	// (Lance's delete_unverified): only when nothing else writes the store.
	DeleteUnverified bool `json:"delete_unverified,omitempty"`
	// BlobGraceSeconds: payload objects younger than this are never
	// deleted (an upload's append may still be on its way); default 3600.
	BlobGraceSeconds *int64 `json:"blob_grace_seconds,omitempty"`
}

// CleanupResponse reports a cleanup.
type CleanupResponse struct {
	VersionsRemoved   int      `json:"versions_removed"`
	FilesRemoved      int      `json:"files_removed"` // manifests included
	BytesRemoved      int64    `json:"bytes_removed"`
	VersionsKept      int      `json:"versions_kept"`
	LatestVersion     uint64   `json:"latest_version"`
	OldestKeptVersion uint64   `json:"oldest_kept_version"`
	LeasesExpired     int      `json:"leases_expired"`
	RowsExpired       int64    `json:"rows_expired"`  // by the store's row retention (cleanup tasks and sweeps)
	HeldVersions      []uint64 `json:"held_versions"` // by leases and checkout pins
	// Payload objects no row refers to any more (in files_removed and
	// bytes_removed too).
	BlobsRemoved     int      `json:"blobs_removed"`
	BlobBytesRemoved int64    `json:"blob_bytes_removed"`
	TaggedVersions   []uint64 `json:"tagged_versions"` // by tags
}

// TagRequest is the body of POST /api/v1/rollouts/{name}/tags.
type TagRequest struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"` // 0: the latest version
}

// Tag is a named version of a store's base table, in Lance's tag format
// (_refs/tags/{name}.json), so LanceDB and pylance check it out by name.
type Tag struct {
	Name         string `json:"name"`
	Version      uint64 `json:"version"`
	ManifestSize int64  `json:"manifest_size"`
}

// TagsResponse is the body of GET .../tags.
type TagsResponse struct {
	Tags []Tag `json:"tags"`
}

// LeaseRequest is the body of POST /api/v1/rollouts/{name}/leases and of
// POST .../leases/{id}/renew (which reads only ttl_seconds).
type LeaseRequest struct {
	Version    uint64 `json:"version"`     // 0: the latest version
	TTLSeconds int64  `json:"ttl_seconds"` // default 3600
	Holder     string `json:"holder,omitempty"`
}

// Lease keeps a base version from cleanup until it expires or is released.
type Lease struct {
	ID        string    `json:"id"`
	Version   uint64    `json:"version"`
	ExpiresAt time.Time `json:"expires_at"`
	Holder    string    `json:"holder,omitempty"`
}

// LeasesResponse is the body of GET .../leases.
type LeasesResponse struct {
	Leases []Lease `json:"leases"`
}

// RetentionConfig is a store's row retention (GET/PUT
// /api/v1/rollouts/{name}/retention): rows older than max_age_seconds (by
// created_at), or whose policy_version is not among the newest
// keep_policy_versions (natural order), are deleted at the next cleanup
// and their bytes reclaimed by the next compaction. 0 is no bound.
type RetentionConfig struct {
	MaxAgeSeconds      int64 `json:"max_age_seconds"`
	KeepPolicyVersions int   `json:"keep_policy_versions"`
}
