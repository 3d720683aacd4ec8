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
//
// The base table's schema is Schema (columns are only ever added, as
// nullable). Its manifest config holds, per shard, the merge watermark
// "lance-context.merged.{shard}" = the highest generation of that shard
// folded into the base, and "lance-context.last-compaction".
//
// # Writes
//
// A process writes only to its own shard (ShardID of its instance id).
// Append validates and converts records to one Arrow batch (JSON and Arrow
// appends share the defaults and checks), hands it to the shard's WAL
// writer, and returns once the WAL entry is durable: an acknowledged row is
// never lost and, written again with the same id, never duplicated in a
// read (newest write wins). Rows become readable when the memtable is
// sealed into a generation (Flush, the worker's sweeper, a full memtable).
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
// Staleness: none. Every read revalidates its snapshot, so it sees every
// commit (of any process) that finished before the read began; what it
// costs is one wave of parallel listings (the shard markers, each known
// shard's manifest directory, the first names of the base's _versions/),
// and manifests are read again only when a listing shows a new version
// (snapshot.go). The base and the shard manifests are read in the same
// wave; a merge that drained a shard between the two reads is detected
// (the base's watermark is below a generation the manifest dropped) and
// the base is read again, which restores the order above.
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
// table, capped per pass (Options.MergeMaxGenerations and MergeMaxBytes; the
// generation that crosses the byte cap is included whole):
//
//  1. claim or hold the shard (its owner, or an orphan merge that claims
//     it and so fences a stalled owner at storage);
//  2. write the generations' rows, newest write of each id, as one new
//     data fragment;
//  3. commit in one Lance commit: the new fragment, deletion of base rows
//     whose ids the fragment rewrites, and the shard's watermark = the last
//     generation merged; a commit that finds the watermark already there
//     (a crashed earlier pass committed it) changes nothing;
//  4. drain: drop the merged generations from the shard manifest, then
//     delete their files. A crash between 3 and 4 leaves readers correct
//     (they skip generations at or below the watermark) and the next merge
//     finishes the drain;
//  5. index upkeep: a delta index segment over the new fragment.
//
// # Compaction and indexes
//
// Compaction rewrites small fragments (and fragments with deletions) into
// fragments of about Options.CompactTargetRows rows in one Rewrite commit,
// then rebuilds the indexes over the rewritten fragments; until then the
// indexes answer only for the fragments in their bitmap and the others are
// scanned, so an index never points at a wrong row.
package rollout
