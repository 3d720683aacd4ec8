// Package rollout is the store: one Lance dataset per store (the merged
// base table) plus the write-ahead tier beside it (package wal), and what
// a service does with them: append, list by source, get, blob, trajectory,
// statistics, merge, compaction and index upkeep.
//
// # Layout (under the data directory)
//
//	_lc_stores/{name}                        registry marker: one empty object per store
//	{name}.rollout.lance/                    a Lance 2.0 dataset, opened as is by LanceDB
//	  _versions/ data/ _deletions/ _indices/ the base table (package lance/table)
//	  _lc_wal/{shard}/...                    each writer shard's WAL tier (package wal)
//	  _refs/tags/{tag}.json                  Lance's tags (lance/table): cleanup keeps their versions
//	  _lc_leases/{id}.json                   a lease: {"id","version","expires_at","holder"}; cleanup
//	                                         keeps the version until expires_at, then deletes the file
//	  _lc_sample/{group}/{MaxUint64-seq}.json a sampler consumer group's ledger: a put-if-absent chain of served keys (sample_ledger.go)
//	  _lc_feed/{group}/{MaxUint64-n}.json  a feed consumer group's commit n: {"group","position",
//	                                         "committed_at"}, put-if-absent, newest first, three kept
//	  _lc_blobs/{uuidv7}                     a payload stored out of line: the raw bytes (blob.go)
//
// The base table's schema is Schema (columns are only ever added, as
// nullable). Its manifest config holds, per shard, the merge watermark
// "lance-context.merged.{shard}" = the highest generation of that shard
// folded into the base, "lance-context.last-compaction", and the row
// retention "lance-context.retention.max-age-seconds" and
// "lance-context.retention.keep-policy-versions" (retention.go).
//
// # Lifecycle (lifecycle.go, maintain.go)
//
// Store.Cleanup removes old base versions (table.Cleanup) keeping the
// latest, tagged and leased versions, this process's checkout pin (itself
// a lease, renewed by the maintainer) and what its running compactions and
// index builds read; a read of another process is covered by the read
// grace. The Maintainer is the one owner of upkeep that worker and master
// drive: sweepers, merges by count and by age, compaction then cleanup (row
// retention first), pin renewal, the memtable budget, and closing stores
// left idle (idle.go: Catalog.Open holds a store until its caller's context
// ends; only a quiescent, unheld store is closed).
//
// # Large payloads (blob.go)
//
// A payload normally travels inline in binary_payload: through the WAL
// entry, the memtable, the generation and the merge, each holding it in
// memory. A multipart part larger than the worker's inline size
// (LC_BLOB_INLINE_BYTES, 8 MiB) is instead streamed as it arrives into its
// own object, _lc_blobs/{uuidv7} (objstore's Create: a temporary file
// locally, one part at a time on S3), and the row records its key in
// payload_ref, with binary_payload null and payload_size and
// payload_checksum (sha256) computed on the way. The object is durable
// before the append's WAL entry is written, so an acknowledged row never
// names a missing object. Reads serve it through ranged gets of 4 MiB
// (OpenPayload: io.ReadSeeker, so HTTP Range requests work), and merges
// and compactions copy only the key. LanceDB sees payload_ref as a string
// column and reads the object beside the table by that relative key.
//
// Collection. An object is garbage when no row can refer to it: Cleanup,
// after removing versions, lists _lc_blobs/ and, if any object is older
// than the blob grace (DefaultBlobGrace, an hour), gathers every
// payload_ref of (1) this process's unsealed rows (Writer.Tail), (2) each
// shard's pending generations, and (3) every base version left, each data
// file once and deleted rows included (a kept older version may still
// hold them). That order is the one a row moves in, and each tier lets go
// of a row only after the next holds it (a seal publishes its manifest
// before its rows leave the tail; a drain follows the base commit), so no
// reference escapes. Another process's unsealed entries are not read: an
// object written after the oldest of them (wal.UnsealedSince), less the
// grace, is kept; for another process's segment log (local disk) that
// time is unknown and every object is kept. The grace itself covers an upload whose append has not reached
// the log yet. So a rewritten or expired row's object goes once no kept
// version's data files hold the row, which takes the compaction that
// rewrites its fragment.
//
// # The schema
//
// The row schema lives in one place, the column table of package row
// (rollout/row, the row model: no I/O): per column its name, Arrow type,
// whether a stored row always has a value, its default, its check, and
// the Record field it maps to. Schema, the JSON path's batch builder
// (row.BuildBatch), the reader (row.FromBatch), the types a column is
// accepted in (also a reference table's dictionary role and zone-less
// created_at), the defaults, and the one validation are all derived from
// it. The wire type Record is package api's; the table maps its fields.
// Package rollout keeps its names for them (Record, Schema, the Col*
// names, ValidationError: row.go).
//
// # Writes
//
// A process writes only to its own shard (ShardID of its instance id).
// Append validates records (JSON and Arrow appends share the defaults and
// checks), puts them in the store's append queue, and returns once the WAL
// entry holding them is durable: an acknowledged row is never lost and,
// written again with the same id, never duplicated in a read (newest write
// wins). Rows become readable when the memtable is sealed into a generation
// (Flush, the worker's sweeper, a full memtable).
//
// The first write claims the shard, and a write fenced by a newer claim
// claims it back once, as an orphan merge's claim is meant to be. But a
// shard held by another live process (two workers with one instance id:
// its heartbeat renewed, or its claim just fenced ours; wal/doc.go,
// "Owners and heartbeats") is not fought over: writes fail with a
// *ClaimedElsewhereError (ErrClaimedElsewhere) naming the instance id,
// shown by Conflict, health and a metric, and checked again every
// heartbeat interval; a predecessor whose heartbeat lapsed (kill -9) is
// replaced after at most its TTL (claimguard.go). A full disk or quota
// fails writes with ErrNoSpace and marks the store full (Full, health, a
// metric) until a write succeeds; while it lasts, the shard is claimed
// again only when its log has room for a segment (nospace.go).
//
// The append queue is the store's one group commit (store.go, the group*
// constants). A driver takes every append waiting, up to groupMaxRecords
// rows and groupMaxBytes, builds the small JSON appends among them (fewer
// than buildBelowRecords records) into one Arrow batch, and hands the group
// to the WAL writer as one entry: building a batch of the 38-column schema
// has a fixed cost (about 170 µs) that a group shares instead of each
// append paying it. Larger JSON appends are built by their callers, in
// parallel, and Arrow appends are conformed by theirs; both join a group
// as batches, each append whole in one entry. Two drivers run at most, one
// group being written while the next is formed. The second takes its group
// groupWindow (2 ms) after the first took, or, when writes take longer
// (a put on S3), shortly before the write in flight is expected to end,
// and at the latest when it ends: the next group then holds every append
// that arrived meanwhile and is built while the write runs. The WAL writer
// itself never waits (wal/doc.go, "Group commit"). An append whose caller
// has gone (its context ended) before its group is formed is not written.
//
// Both append paths run one validation: Append (JSON and multipart
// records) validates the Records (row.Prepare), AppendArrow the batch's
// columns converted to Schema's types (row.ConformPart). A rule is written once, so a bad
// value gets the same message whichever way it came: "record N: what",
// for the lowest bad row, and in it the first of: a required value
// missing, text that is not UTF-8, a column's check (in table order),
// nothing stored. Defaults (id: a new UUIDv7, problem_id: rollout_id, role, content_type,
// created_at: now, sequence_order: 0, payload_size and payload_checksum
// from the payload) come from the same table.
//
// # Snapshots and sources
//
// A read takes a snapshot in this order: the shard manifests first, then
// the base table. Every generation a manifest lists is then either above
// the shard's watermark in that base (pending: read from its file) or at or
// below it (already in the base: skipped), whatever merge commits between
// the two reads; a generation file a concurrent merge deleted makes the
// read retry on a fresh snapshot (readRetry).
//
//	fragments  the base table only; no WAL manifest is read
//	wal        the pending generations only, one row per id (the newest)
//	all        both: pending rows, and base rows whose id has no pending write
//
// Get, Blob and Trajectory always read all. A Checkout pins this process's
// reads to an older base version, without the WAL tier.
//
// A read's snapshot is a view (view.go), the one owner of the rule "a
// pending row hides every base row of its id": gets, the list strategies,
// trajectories and scans read the base through it, and the SQL engine
// through BaseTable, a view of the base alone. testdata/view states the
// rule's outcomes as tables (view_data_test.go).
//
// Staleness: none by default. Every read revalidates its snapshot, so it
// sees every commit (of any process) that finished before the read began; what it
// costs is one wave of parallel listings (the shard markers, each known
// shard's manifest directory, the first names of the base's _versions/),
// and manifests are read again only when a listing shows a new version
// (snapshot.go). The base and the shard manifests are read in the same
// wave; a merge that drained a shard between the two reads is detected
// (the base's watermark is below a generation the manifest dropped) and
// the base is read again, which restores the order above. A shard the
// listing names that this handle has not read yet (a new process reading
// another process's shard) has its manifest directory listed as soon as
// the listing returns, not after the base.
//
// Read consistency interval (Options.ReadConsistencyInterval, the worker's
// ROLLOUT_READ_CONSISTENCY_INTERVAL, a Go duration; named after LanceDB's
// read_consistency_interval): with N > 0, a read may reuse the snapshot
// metadata (shard listing, shard manifests, base version) a read of the
// same handle validated less than N ago, counted from when that read's
// listings began, and then makes no metadata request. Other processes'
// commits are so seen at most N late; this process's own commits (a seal
// or flush, a merge, a compaction, an index build, a checkout, the
// store's deletion) end the reuse at once, so a process always reads its
// own writes. A read retried after a generation file vanished revalidates.
// 0 (the default) is the strong behaviour above.
//
// Cold reads: when a snapshot reads a base version this process has not
// opened yet, it also opens, in parallel and in the same wave as the shard
// manifests, the BTree index the read looks up (id for pages and gets,
// rollout_id for trajectories, a filtered page's filter columns; both
// files of each at once; the other indexes are left to the reads that use
// them) and the data files of the newest 8 fragments (footer and column
// metadata): all immutable, cached by name, so this costs requests only
// once per version and saves the dependent index-then-footer-then-data
// chain of the first read. Get, trajectory and a page of source all, when
// the pending generations are not decoded in the generation cache yet,
// read the base at the same time as they read them (the newest write
// still wins: base rows are used only for ids no pending generation
// holds; a page whose early base walk the pending rows cut short walks
// again). A first read of a new process so costs at most 5 sequential
// round trips (rollout/roundtrips_test.go pins them).
//
// Listings are in id order (cursor.go): a page holds the smallest ids
// above the cursor, so following next_cursor returns every row that
// existed when the listing began exactly once across merges and
// compactions. The base part walks the id index in order when there are
// no filters, and goes through the index of a filtered column otherwise
// (indexes.go); fragments no index covers are scanned.
//
// # Merge
//
// A merge folds the oldest pending generations of one shard into the base
// table, capped per pass (Options.MergeMaxBytes, default 1 GiB of
// generation files; the generation that crosses it is included whole; and
// Options.MergeMaxGenerations, default 1024, which a backlog of small
// generations does not reach):
//
//  1. claim or hold the shard (its owner, or an orphan merge that claims
//     it and so fences a stalled owner at storage);
//  2. open the base table once; that version gives the watermark, the new
//     file's schema and the first commit attempt;
//  3. stream the generations newest first, each read once and whole
//     (wal.StreamNewest), writing each one's rows that hold the newest
//     write of their id straight into one new data fragment (so it holds
//     the newest generation's rows first); memory holds the few
//     generations read ahead and the set of ids;
//  4. commit in one Lance commit: the new fragment, deletion of base rows
//     whose ids the fragment rewrites, and the shard's watermark = the last
//     generation merged; a commit that finds the watermark already there
//     (a crashed earlier pass committed it) changes nothing;
//  5. drain: drop the merged generations from the shard manifest, then
//     delete their files. A crash between 4 and 5 leaves readers correct
//     (they skip generations at or below the watermark) and the next merge
//     finishes the drain;
//  6. index upkeep: a delta index segment over the new fragment.
//
// Requests per pass: one read per generation, the fragment's writes, the
// commit, and one delete per generation file; not a multiple of passes.
//
// Reads of the tier (wal, all, get, blob, trajectory) follow wal's newest
// wins rule (wal.NewestRows, wal.FindNewest) over generations decoded in
// the GenCache, bounded by bytes, keyed by file. Of a generation larger
// than wal.SmallGeneration the cache keeps the narrow columns only (keys,
// filters, order, scores, lc_seq); the wide ones (long text, lists) are
// read from the generation's file for the rows a read returns, all of a
// generation's rows in one read and the generations side by side
// (pendingrows.go). A worker's backlog of large sealed-in-place
// generations then fits the cache, where whole it outgrew it and every
// read decoded it again.
//
// # Metrics
//
// Besides the WAL's (package wal), a catalog registers, in the
// lance_context namespace: merge_seconds, merge_rows_total,
// merge_generations_total, merge_replaced_rows_total,
// merge_failures_total, compaction_seconds, compaction_rows_total,
// compaction_fragments_removed_total, compaction_failures_total, and the
// generation cache's generation_cache_hits_total, _misses_total,
// _loaded_bytes_total and generation_cache_bytes (metrics.go).
//
// # The feed (feed.go, feedindex.go, feedgroups.go)
//
// The feed gives every row once per consumer, each shard's rows in the
// order they became durable, wherever the row is now: in this process's
// unsealed memtable, in a pending generation, or in the base table.
//
// Where a row is. Each row carries lc_shard (the shard that wrote it,
// ShardKey) and lc_seq (its sequence number in that shard: the position of
// its WAL entry << 24 plus its row number in the entry, wal.Seq). The
// number is fixed when the entry is durable: replay adopts an entry at the
// position it was written at, positions are dense and never reused, and a
// seal writes lc_seq into the generation, a merge lc_shard into the base,
// and compaction copies both. So a row has the same (lc_shard, lc_seq)
// from its acknowledgement on, whichever tier holds it and whichever
// process reads it. (Rows merged before the columns existed, and rows
// another Lance writer added, have none and are not in the feed.)
//
// The position. A position is, per shard, the last seq delivered (or
// passed over by a filter); its text (Position.String) is opaque to
// clients. A read returns, per shard, rows with seq above the position's,
// in ascending seq, and the position moves to the last one returned. A
// consumer group's position is what its consumer committed last; a read
// commits nothing. Commits are a put-if-absent chain (feedgroups.go): a
// commit whose write reaches storage after a newer one finds its name
// taken and fails, so a stalled or orphaned request never moves a group
// back (which would deliver rows again).
//
// Why exactly once. (1) Never twice: a row is returned only if its seq is
// above the position, and the position handed back is at least the seq of
// every row returned; positions only move up within a read, and a row's
// seq never changes. So once a consumer has committed past a row, no read
// from that position returns it, whether the row is still unsealed, sealed
// or merged. (2) Never skipped: a read returns, per shard, a prefix of the
// rows above the position in seq order, so the position never passes a
// row the read did not see, provided the read sees every row of the shard
// above the position that exists. It does: a read takes this process's
// tail first (wal.Writer.Tail: the unsealed rows, including a seal in
// flight until its manifest is published), then a snapshot (shard
// manifests, then the base: every generation a manifest lists is pending or
// in the base, "Snapshots and sources"). Sealed rows are in the snapshot's
// generations or base; unsealed ones in the tail. If the snapshot's
// manifest of this shard is older than the tail (a seal committed between
// the two: the tail's first entry is above replay_after + 1), the read
// starts again with a fresh snapshot instead of jumping the gap
// (errTailGap). So does a read whose base has merged a generation that
// its manifest of this shard does not know yet (the shard's watermark in
// the base at or above the manifest's next_generation: a seal and a merge
// between the two reads), whose base could hold tail rows the manifest's
// replay_after does not cover. After two such reads it answers with the
// snapshot's rows alone, which all come before the tail's. Rows of another process's shard appear when that process
// seals them (every 30 s, or at once with flush): before, they are in no
// snapshot, and a row that is not visible is not passed, because the
// position moves only through rows read. (3) Acknowledged means findable:
// an acknowledged row is in a durable entry, which is either in the tail
// of the owner that wrote it or replayed and sealed by the next owner with
// the same seq, so a restart of the worker neither loses nor renumbers it.
//
// What once means for a row that changes. A rewrite of an id is a new row
// (a new seq) and is delivered again. A row superseded or deleted before a
// consumer reached it (a newer write of its id merged over it, row
// retention, a LanceDB delete) is no longer in the store and is not
// delivered: a consumer far behind sees each id's latest row, as a
// compacted Kafka topic shows it. A client that retries an append whose
// acknowledgement it lost writes the rows again: both copies may be
// delivered (the store deduplicates ids in reads, not in the log).
//
// Finding the rows. Generation rows are in seq order (a seal writes its
// entries in order), so a read binary-searches each pending generation's
// lc_seq. In the base, a merge writes a shard's generations into one
// fragment (newest first) and compaction mixes fragments, so the feed keeps
// per fragment its rows sorted by (shard, seq) (feedIndex, keyed by data
// files and deletion file; an LRU bounded by a share of the memory budget)
// and each fragment's first and last seq per shard, visits the fragments
// that can hold rows above the position in order of their first seq, and
// reads only the rows it returns (TakeRows). Reading a fragment's two
// columns once costs 16 bytes a row; a consumer at the head of the store
// touches only the newest fragments.
//
// Waiting. A read with a wait that finds nothing waits for this process's
// next acknowledged append (a channel closed by the append path) or
// re-reads the shard manifests every 200 ms for other processes' seals.
// A filtered read that passes over rows without a match goes on reading
// (up to 16 reads without a wait) and answers with the moved position.
//
// # Compaction and indexes
//
// Compaction rewrites small fragments (and fragments with deletions) into
// fragments of about Options.CompactTargetRows rows in one Rewrite commit,
// then rebuilds the indexes over the rewritten fragments; until then the
// indexes answer only for the fragments in their bitmap and the others are
// scanned, so an index never points at a wrong row. Without a master, the
// Maintainer compacts a store after a merge (MaintainPolicy.
// CompactMinFragments) once the merges added that many fragments since its
// last compaction here, or once deleted rows outnumber live ones
// (DeletionsCallForCompaction, which the master's scheduler uses too):
// rewritten ids leave a deleted row per old version, so the base holds at
// most about twice its live rows between compactions.
package rollout
