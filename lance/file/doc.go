// Package file reads and writes Lance data files in format 2.0, the format
// LanceDB 0.31 (Lance 8.0) writes for tables created with data storage
// version "2.0".
//
// A Writer streams Arrow record batches into one file, holding about one
// page (WriterOptions.PageBytes, 8 MiB by default) of encoded data per
// physical column. Open reads a file's footer and metadata with one ranged
// read of the last 64 KiB (a second read only when the metadata is larger);
// OpenTail takes those bytes from a caller that read them together with the
// file's size (objstore.GetTail: one request where Open needs the size
// first, then its read);
// Reader.Read then fetches only the pages, and within large pages only the
// byte ranges, that the requested rows and columns need, coalescing nearby
// ranges into one read. The fields of one Read decode concurrently and
// their reads go out in waves: every field's first reads together, nearby
// ranges of different columns coalesced into one ranged read, then what
// those reads tell them to read next (a string column's bytes after its
// offsets), so a Read costs one object-store round trip per dependent step,
// not per column. No byte is read twice by one Read: a range that Open's
// tail (kept by the Reader; a small file is all tail, and its reads cost
// no request) or an earlier wave of the Read holds (the gap a coalesced
// read fetched between two ranges) is taken from those bytes, and a
// coalesced read reads only the parts around them. Up to IOConcurrency reads
// (IOOptions.Concurrency, set
// by the process from LC_IO_CONCURRENCY; default 32: sized for latency,
// not cores) are in flight per wave. A Source that
// reads a local file (LocalSource) skips the waves: its fields decode in
// turn and a fetch of up to 8 ranges reads them in turn, as a page-cache
// read costs less than the goroutines.
//
// Offsets (the u64 ends of a string or list page) are cached packed (row
// lengths per block of 256 rows, bit-packed to their range) in the cache
// of the Reader's IO (by default the process-wide internal/lru), so a
// later read of the same rows fetches their bytes in the first wave. An
// entry is keyed by the Reader's number, not the Reader, so the cache
// keeps only the offsets it is charged for, never a dropped Reader and
// its Source (a Source may hold a whole file). A
// point read of an object (a Source that is not a LocalSource) reads the
// 512-entry (4 KiB) chunks of the offsets buffer its rows fall in and
// caches those chunks: what a cold read downloads is bounded by what it
// returns, however many rows a page holds. A read of much of a page (a
// scan) reads a buffer up to 1 MiB whole and caches it. With
// IOOptions.WholeOffsets, and always for a local file, a point read reads
// the buffer whole instead (up to 1 MiB) and the first point read to do
// so for a column of a Reader also starts a background read of the
// column's other such buffers (up to 32 MiB in all), so that random reads
// over many pages do not each meet an uncached one; a larger one (up to
// 32 MiB: a page of short strings holds up to a fragment's rows) is read
// by the slice a point read needs and, once per Reader, whole in the
// background for the reads after it (queued: half the CPUs read such
// buffers at once per IO, and IO.Wait or, for the default IO,
// WaitPrefetches waits for them).
// An IO (NewIO) owns that cache, the slots and the concurrency; Open and
// OpenTail use DefaultIO, IO.Open and IO.OpenTail another. Arrays point into the fetched bytes
// where the layout allows (one page, no conversion); a Source that also
// implements SourceInto gets large buffers read straight into the output
// arrays.
//
// # File layout
//
// All integers are little-endian. In order:
//
//  1. Data buffers. Every buffer starts at a multiple of 64 bytes; the gap
//     after a buffer is zero-filled. Pages are written as they fill, so the
//     pages of different columns interleave.
//  2. Global buffer 0: a serialized lance.file.FileDescriptor{schema=1,
//     length=2} (the schema as pre-order lance.file.Field messages, and the
//     row count). It must precede the column metadata: Lance reads from here
//     to the end of the file as one block.
//  3. One lance.file.v2.ColumnMetadata per physical column, in column order:
//     encoding=1 (direct; an Any "/lance.encodings.ColumnEncoding" holding
//     ColumnEncoding{values=1 {}}), pages=2.
//  4. The column metadata offset table: (u64 position, u64 size) per column.
//  5. The global buffer offset table: (u64 position, u64 size) per global
//     buffer (we write one).
//  6. The 40-byte footer: u64 column_meta_start, u64 cmo_table_start,
//     u64 gbo_table_start, u32 num_global_buffers, u32 num_columns,
//     u16 major, u16 minor, "LANC". Format 2.0 is written as 0.3, as Lance
//     does; the reader accepts 0.3 and 2.0 and rejects everything else
//     (2.1 and 2.2, and the legacy 0.1/0.2) with ErrUnsupportedVersion.
//
// A file may start with bytes that are not its own (WriterOptions.Base):
// the WAL frames of a segment sealed in place (package wal). Its buffers
// then start after them, and a binary page whose values are already among
// them (WriterOptions.Placed) lists that range as its bytes buffer (any
// position and alignment: Lance locates buffers only by the page's
// positions and sizes) and has only its ends written. Such a page holds
// exactly one written array's rows. LanceDB 0.31 reads these files
// (TestLanceDBReadsOurFiles).
//
// A page (ColumnMetadata.Page) lists its buffers' positions and sizes
// (fields 1, 2), its length (3: rows, or items for an items column), its
// encoding (4: direct, an Any with type URL "/lance.encodings.ArrayEncoding"
// written with a bare leading slash) and priority (5, always 0). Buffer
// indices in an encoding count the page's buffers in the order listed.
//
// # Columns
//
// Fields map to physical columns in schema pre-order:
//
//   - a primitive, string/binary or fixed_size_list field: one column;
//   - a list or large_list: one offsets column, then the columns of its item
//     field (a list<list<int32>> has three columns);
//   - a struct: one header column, then the columns of its members.
//
// Writer.Finish reports this as Info.FieldIDs / Info.ColumnIndices (every
// field id with the first column of its subtree), which is what a
// manifest's DataFile.fields / column_indices need.
//
// # Page encodings written (lance.encodings.ArrayEncoding)
//
// Fixed width: bool (Flat of 1 bit per value, Arrow bit order: LSB first),
// int8..int64, uint8..uint64, float32, float64, date32, timestamp of any
// unit (stored as its int64):
//
//	no nulls    Nullable.no_nulls(Flat{bits, buf 0})                      [values]
//	some nulls  Nullable.some_nulls(Flat{1, buf 0}, Flat{bits, buf 1})    [validity, values]
//	all null    Nullable.all_nulls                                        []
//
// Validity bitmaps are Arrow-style (1 = valid). Null slots hold zeros.
//
// fixed_size_list<fixed width, d> (one column; d items per row):
//
//	no nulls    Nullable.no_nulls(FixedSizeList{d, items=no_nulls(Flat{bits, buf 0})})
//	some nulls  Nullable.some_nulls(Flat{1, buf 0},
//	              FixedSizeList{d, items=some_nulls(Flat{1, buf 1}, Flat{bits, buf 2})})
//	all null    Nullable.all_nulls
//
// The item validity is the items' own validity AND the row's (so a null row's
// d items are null), which is the shape LanceDB writes; items that are all
// null are Nullable.all_nulls.
//
// utf8, large_utf8, binary, large_binary (one encoding for all four):
//
//	Binary{indices=Nullable.no_nulls(Flat{64, buf 0}), bytes=Flat{8, buf 1},
//	       null_adjustment=A}                                            [ends, bytes]
//
// ends holds one u64 per row: the cumulative end offset of the row's bytes
// within the page (no leading 0). A = total page bytes + 1; a null row
// stores its end + A and contributes no bytes. A page whose rows are all
// null is Nullable.all_nulls with no buffers, as LanceDB writes it (the
// reader also takes the Binary shape with every end at A). The 32/64-bit
// offset width comes from the schema, not the page.
//
// list<T> and large_list<T>, offsets column:
//
//	List{offsets=Nullable.no_nulls(Flat{64, buf 0}),
//	     null_offset_adjustment=N+1, num_items=N}                        [ends]
//
// ends are u64 end offsets into this page's N items (items of earlier pages
// are not counted); a null list stores end + N+1. The items go to the next
// column(s) as an ordinary field of type T whose rows are the items; an
// items page holds items of one offsets page only (when an offsets page is
// written, the pending items are written too). An offsets page with no
// items produces no items page.
//
// struct: the header column gets a single page, written at Finish, with no
// buffers, encoding ArrayEncoding.struct (SimpleStruct{}) and length = the
// struct's rows. Format 2.0 has no struct-level validity, so the writer
// pushes a struct's nulls into its members: a null struct row reads back as
// a non-null struct whose members are all null. Packed structs are not
// supported.
//
// Arrow dictionary columns (dictionary<int8|16|32, uint8|16|32 keys, utf8 or
// binary values>; Lance logical type "dict:{value}:{index}:false"), one
// column, the shape LanceDB writes for them:
//
//	Dictionary{indices=Nullable.no_nulls(Flat{key bits, buf 0}),
//	           items=Binary{indices=no_nulls(Flat{64, buf 1}), bytes=Flat{8, buf 2}, adj},
//	           num_dictionary_items=N}                               [keys, item ends, item bytes]
//
// Every page carries its own dictionary: the distinct values of its rows in
// first-seen order, each once, whatever the input arrays' dictionaries
// hold. Keys are the Arrow keys of that dictionary as they are (0 is the
// first item). A null row points at a null item (one per page, stored as
// end + adj like a null string); the keys carry no validity. A page is
// written when it reaches PageBytes or before a new value would need a key
// the index type cannot hold (the 129th value for int8). The writer takes
// dictionary arrays or plain arrays of the value type. Read returns one
// dictionary array whose dictionary is the union of the pages' values, each
// once; rows whose union exceeds what the index type addresses fail with
// ErrUnsupported. ReadWith(ReadOptions{PlainDictionaries: true}) returns
// plain value arrays instead, with no such bound. (LanceDB has the bound
// too: its scans fail with "Dictionary key bigger than the key type" when a
// batch spans pages holding more distinct values than the keys address.)
//
// The writer never compresses or bitpacks, and dictionary-encodes only
// dictionary-typed columns (LanceDB does none of that for 2.0 either, except
// dictionary pages for low-cardinality strings, below). Pages are split by bytes: a column writes a page when its
// buffered encoded bytes reach PageBytes; a value bigger than that gets a
// page of its own. Columns split independently, so pages of different
// columns hold different row counts.
//
// # What the reader also decodes
//
// Everything above, and what LanceDB writes for 2.0 besides: dictionary
// pages for strings (Dictionary{indices=no_nulls(Flat{8}), items=Binary,
// num_dictionary_items}: index 0 is null, index k is item k-1; items may be
// all null), some_nulls/all_nulls around any of the shapes, zero-length
// all_nulls pages of empty items columns, items columns with no pages,
// multi-page columns whose pages have different row counts, items pages that
// span several offsets pages, buffers referenced as column or file buffers,
// and struct / list<struct> columns. Compressed, bitpacked, FSST, packed
// struct and constant pages, and any 2.1 layout, are reported as
// ErrUnsupported (or ErrUnsupportedVersion) when a Read touches them.
//
// # Interoperability
//
// LanceDB 0.31 reads files from this writer, every type above included
// (struct, list<struct>, list<list<T>> and list<fixed_size_list> too), with
// small or default pages. One caveat from LanceDB itself: its filtered scans
// (late materialization via take) panic on list<struct> whose struct has two
// or more members, for files LanceDB wrote too; full scans work.
//
// # Robustness
//
// The reader treats every length and offset in the file as untrusted: they
// are checked against the file size and the buffers they index before use,
// and errors wrap ErrCorrupt. Decoded output is charged to a per-Read budget
// (the larger of 1 GiB and 16 times the file size; ErrTooLarge beyond), so a
// hostile all-null page claiming 2^60 rows cannot make Read allocate without
// bound. FuzzOpen fuzzes Open and Read.
package file
