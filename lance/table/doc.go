// Package table reads and commits Lance tables (datasets): manifests,
// fragments, deletion files and transactions, on top of objstore.Store.
//
// # Layout (relative to the table root)
//
//	data/{uuid}.lance                         Lance 2.0 data files (see lance/file)
//	_versions/{name}.manifest                 one manifest file per version
//	_versions/latest_version_hint.json        {"version":N}, best effort
//	_transactions/{read_version}-{uuid}.txn   raw lance.table.Transaction
//	_deletions/{frag}-{read_version}-{id}.bin Roaring bitmap of deleted offsets
//	_deletions/{frag}-{read_version}-{id}.arrow  Arrow IPC file, one int32 column (read only)
//	_indices/{uuid}/                          index files (see lance/index)
//	_refs/tags/{name}.json                    a tag, as Lance writes it: {"version":N,"manifestSize":M}
//	                                          (Lance's "branch" field absent: the main branch)
//
// Manifest names: V2 (what we create) is the zero-padded 20-digit decimal
// of (2^64-1 - version), so a lexical listing yields the newest first; V1 is
// "{version}.manifest". A table uses one scheme; we detect it from the
// existing files before committing and never mix them.
//
// # Manifest file bytes
//
//	[u32 len][IndexSection]   optional; carried from the previous version (unknown
//	                          fields kept), changed by index commits and compaction
//	[u32 len][Transaction]    the transaction of this version (also in _transactions/)
//	[u32 len][Manifest]       Manifest.index_section / transaction_section hold the
//	                          absolute offsets of the two prefixes above
//	[i64 manifest position][u16 0][u16 2]["LANC"]
//
// # Finding the latest version, and caches
//
// V2 names sort newest first, so Open lists the first few names of
// _versions/ (one request: objstore.ListFirst; S3's max-keys, GCS's
// maxResults, Azure's maxresults) and takes the first manifest; a V1 table
// is found from the hint, probing upward. A
// listing is strongly consistent, so Open always returns the latest
// version committed before it began. Decoded manifests, opened data file
// readers (footer and column metadata) and deletion bitmaps are kept in a
// Cache: by default (DefaultCache, what Open, Checkout, Create and Commit
// use) the process-wide byte-bounded LRU (internal/lru;
// LC_METADATA_CACHE_BYTES, default 1 GiB) with data files opened through
// file.DefaultIO; NewCache makes one with its own LRU and file.IO, whose
// methods open tables that share nothing with others (a Dataset, and every
// version committed from it, keeps its Cache). Data and deletion files are immutable (fresh names), so
// those entries never go stale; a manifest entry is used only when the
// listed object's size and modification time match the cached one (a table
// deleted and created again reuses manifest names). Dataset.WarmFiles opens
// the newest fragments' data files in parallel into that cache (a new
// process's first read then pays one round trip for their footers, taken
// from the manifest's file sizes without a Head, instead of one before each
// read). A data file whose size the manifest lacks is opened from one read
// of its tail that also returns its size (objstore.GetTail), not a Head and
// then a read.
//
// # Commit protocol
//
// A commit reads the latest version V, builds version V+1 from it and writes
// the manifest with PutIfAbsent. Losing that race (ErrExists) means another
// writer (ours or LanceDB) committed V+1: we reload the latest version and
// rebuild the operation against it ("rebase"), without rewriting data files.
// An operation that cannot be rebased (compaction of a fragment that changed
// meanwhile) fails with ErrConflict. Before writing we check the feature
// flags of the latest version and refuse to write past flags we do not
// implement (we implement 1 = deletion files and 8 = table config).
//
// # Cleanup (cleanup.go)
//
// Cleanup removes old versions as Lance's cleanup_old_versions does. Kept:
// the latest version and any newer, tagged versions, versions the caller
// holds (leases, pins), versions committed at or after a cutoff, and
// versions superseded within a read grace (a read that opened one as the
// latest may still run). A data, deletion, transaction or index file that
// no kept manifest references is removed when a removed manifest
// references it, or, referenced by none (a failed or in-flight commit),
// when it is older than 7 days (or delete_unverified) and than the oldest
// kept version. Files go first, then manifests oldest first, so a crash
// leaves every kept version whole and the next cleanup finishes.
//
// Table config (Manifest.config) carries our own keys, such as per-shard merge
// watermarks; they are committed in the same manifest as the data they
// describe, so a reader never sees one without the other.
package table
