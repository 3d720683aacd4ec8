// Package index reads and writes Lance scalar (BTree) indexes in Lance's
// own format, so LanceDB and pylance use the indexes we build and we use
// theirs. The facts below come from the Lance repository (protos/table.proto,
// protos/index_old.proto, protos/transaction.proto,
// rust/lance-index/src/scalar/btree.rs, flat.rs, lance_format.rs,
// rust/lance/src/index.rs, rust/lance/src/index/prefilter.rs, read at the
// lancedb/lance tag v1.0.0-beta.1) and were checked against LanceDB 0.31.0
// in test/interop: LanceDB plans id = '…' and rollout_id = '…' on indexes
// we build, we read the indexes it builds, and both read each other's
// after appends, deletions, merges and compactions.
//
// # Manifest: the index section
//
// Index metadata is not in the Manifest message: the manifest file holds a
// length-prefixed lance.table.IndexSection{indices=1} before the
// transaction, and Manifest.index_section is its offset (see lance/table).
// Each lance.table.IndexMetadata:
//
//	uuid=1             UUID{uuid=1: 16 raw bytes}; the files live in _indices/{uuid}/
//	fields=2           field ids (one for a scalar index)
//	name=3             unique per version; LanceDB names it "{column}_idx"
//	dataset_version=4  the version the index was built from
//	fragment_bitmap=5  portable 32-bit Roaring bitmap of the fragment ids covered
//	index_details=6    google.protobuf.Any; a BTree has type_url
//	                   "/lance.table.BTreeIndexDetails" (bare leading slash)
//	                   and an empty value
//	index_version=7    0 for BTree
//	created_at=8       ms since the epoch
//	base_id=9          base path id (unused here)
//
// Several IndexMetadata may share a name (delta segments; LanceDB 0.31
// lists them as one index and reports numIndices). A query uses an index
// only for the fragments in its bitmap that are still in the version;
// every other fragment is scanned. LanceDB's listIndices names the type
// "BTree", indexStats "BTREE". Deleted rows stay in the index and are
// dropped at read time through the fragments' deletion files. An index is
// committed with a CreateIndex transaction (operation 103:
// new_indices=1, removed_indices=2); replacing an index removes the old
// uuid and adds the new one in the same commit.
//
// # Row addresses
//
// Without stable row ids (feature flag 2, which we never set) a row id is
// its address: fragment id << 32 | row offset within the fragment,
// counting deleted rows.
//
// # Files under _indices/{uuid}/ (Lance 2.0 files, footer version 0.3)
//
//	page_data.lance    columns values (the key type, nullable) and ids
//	                   (uint64, nullable; the row addresses): every indexed
//	                   row, sorted by value ascending, nulls first. Page i is
//	                   rows [i*batch_size, (i+1)*batch_size); the file's own
//	                   pages need not line up with these.
//	page_lookup.lance  one row per page: min (first value of the page, null
//	                   if that is null), max (last value), null_count
//	                   (uint32), page_idx (uint32, 0, 1, ...). Schema
//	                   metadata batch_size: the rows per page, "4096" from
//	                   LanceDB (a reader takes 4096 when absent); ours write
//	                   256, which LanceDB honours (checked in test/interop).
//
// Equality (and IN) searches find the pages whose [min, max] holds the value
// by binary search over the lookup, read those pages and binary-search
// them. A page whose min and max are both the value holds nothing else
// (pages are sorted, nulls first): of a run of such pages (a frequent
// value, e.g. a problem with thousands of rows) only the row ids are read,
// in one range, and cached apart from whole pages. Otherwise a page's row
// ids are read only on a match: most of a merge's probes miss. (Reading
// values and ids in one two-column Read was measured slower on local disk:
// a Read of several fields decodes them in goroutines.)
//
// A batch lookup of many keys (the merge's check for rows its new ids
// supersede, mostly absent) first asks each large segment's key filter, a
// split block Bloom filter of its values (10 bits a key, ~1% false
// positives), and reads pages only for the keys it may hold. Filters live
// in memory only, in the page cache beside the pages: never written beside
// the index, whose files stay Lance's. A build of a key column
// (BuildOptions.KeyColumns) makes its segment's filter as it writes it; a
// process that did not build the segment makes it in the background from
// its values on the segment's first batch lookup (one at a time), and
// until then reads pages as before; a build that fails is logged and not
// tried again for a doubling delay (10 s up to 10 min), since each try
// reads all the segment's values.
//
// The first point lookup of an index in a process (not a merge's batch,
// which has the key filter) starts its prewarm: every page, values and row
// ids, read into the page cache in the background (64 pages a read, one
// index at a time per Cache, resting as long as each read took), when
// page_data is at most half the cache and an eighth of the Go memory
// limit (CacheOptions.NoPrewarm, from LC_INDEX_PREWARM=off, turns it off). Without it a key index of
// 10M rows (~39,000 pages) served a random lookup from a cold page nearly
// every time until tens of thousands of lookups had passed: a decode of
// ~15 us and two reads that the 100k-row index, cached after a few
// hundred lookups, never paid.
// Lance offers the same as prewarm_index. Pages read ahead get buffers of
// their own, so an evicted page frees its memory.
//
// Because page i holds exactly rows [i*batch_size, (i+1)*batch_size), the
// number of entries below a value is its page's first row plus its position
// in that page: one page read (Ranker, for deep offsets). Entries that are
// not live rows (deleted since the build) are found by reading the deleted
// rows' keys and subtracted; an index holding entries of fragments outside
// its bitmap is not ranked (its walk is counted instead). Ordered walks
// (Ascend, AscendEach) read pages in order and skip rows of fragments
// outside the bitmap.
//
// # Building and maintenance
//
// Build streams the column with row addresses, sorts runs of bounded size
// (BuildOptions.RunBytes, default 128 MiB: a million ids of each of two
// columns built at once are sorted in memory; the columns share it) by an
// 8-byte key past the run's common prefix (a radix sort, ties then ordered
// by their values and row addresses), spills them to unlinked
// temporary files, then k-way merges the runs into page_data. A run that
// needed no spill is copied in index order (entries and values) before the
// merge, which then reads memory sequentially. Update brings an index up to date
// with new fragments by merging the existing index's pages (only fragments
// still live, deleted rows dropped) with the new fragments' sorted values
// into a new index, committed in place of the old one under the same name
// (what Lance's optimize does for a BTree). A commit narrows a new index's
// bitmap to the fragments of the version it lands on, so an index built
// while a compaction removed fragments never claims them. Files of an
// index that was never committed are garbage no manifest names; Lance's
// cleanup removes them.
//
// Only string keys (utf8, large_utf8) are supported.
package index
