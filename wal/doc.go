// Package wal is the write-ahead tier of one store: per-shard logs of
// appended rows, made durable in object storage before they are
// acknowledged, sealed into immutable generation files, and fenced so that a
// shard has exactly one writer.
//
// # Layout (relative to the dataset root)
//
//	_lc_wal/{shard}/manifest/{hex16(reverse64(version))}.json   shard manifest versions
//	_lc_wal/{shard}/manifest/hint.json                          {"version":N}, best effort
//	_lc_wal/{shard}/wal/{position:020d}.arrow                   WAL entries (object log)
//	_lc_wal/{shard}/log/{epoch:020d}-{seq:020d}.seg             WAL segments (local filesystem)
//	_lc_wal/{shard}/gen/{generation:010d}-{uuid}.lance          sealed generations (a new file,
//	                                                            or a segment sealed in place)
//	_lc_wal/{shard}/heartbeat/{epoch:020d}.json                 the owner's heartbeat
//
// Manifest version names are bit-reversed so that consecutive versions land
// on unrelated key prefixes (object stores partition by prefix); the latest
// version is found from the hint by probing upward (HEAD of version+1 until
// it is absent), or by listing when the hint is missing or names a version
// that was garbage-collected. A writer updates the hint in the background
// after its commits (at a claim, before it returns), at most four times a
// second, and deletes old versions only below the last hint it wrote, so
// every version from the hint up exists: a stale hint costs a reader a few
// probes, never a wrong answer. A claim finds the latest version by
// listing instead: after a crash a deleted version (deletes are not
// flushed) may come back below a gap, and a claim must never build on it.
//
// # Shard manifest (JSON)
//
//	{"version": 7,            dense, written put-if-absent: version v+1 exists
//	                          only if exactly one writer created it
//	 "epoch": 3,              the writer epoch; claiming a shard writes a new
//	                          version with epoch+1
//	 "next_generation": 12,   number of the next sealed generation
//	 "replay_after": 41,      WAL positions <= this are sealed into generations
//	 "log_epoch": 3,          segments of lower epochs are dead (absent: 0)
//	 "claims": [1, 4, 6],     versions that claimed the shard: never collected
//	 "fences": [9, 30],       positions of claims' fence entries (object log):
//	                          never collected (see Fencing)
//	 "owner": {"id": "6f1c...", "instance": "w-1", "host": "pod-a", "pid": 7,
//	           "merge": false},  the process whose claim made this epoch
//	                          (absent: a writer that records none); carried
//	                          on by the epoch's later versions
//	 "generations": [{"generation": 11, "path": "gen/...", "rows": 100,
//	                  "bytes": 52311, "min_id": "a", "max_id": "z",
//	                  "sealed_at": "2026-11-29T17:00:00Z"}],
//	 "updated_at": "..."}
//
// # WAL entries
//
// An entry is an Arrow IPC stream (one or more record batches with the
// store's row schema) whose schema metadata carries lc.epoch, lc.shard and
// lc.position (the position as 20 zero-padded digits, so that a writer
// builds its schema message once per column set and patches the digits
// per entry). An entry leaves out the nullable columns that are null in
// every row of its batches (its schema is the row schema minus those, in
// order); replay adds them back as null columns. Appends of different
// column sets go into different entries. A claim's fence entry (see
// Fencing) is the only entry without batches.
// Entries sit at dense positions starting at 1 and are written
// put-if-absent.
//
// # Group commit
//
// The shard's single writer goroutine takes every append waiting for it
// (up to MaxEntryBytes, one column set), writes them as one entry, and
// acknowledges each only once that entry is durable and the writer still
// owns the shard (see Fencing). Each appender encodes its own record batch
// messages, as pieces that point into its batches' buffers (only the
// message headers and padding are copied); the writer goroutine only
// concatenates them, into the frame buffer a segment log reuses from
// frame to frame, so a row's bytes are copied once in user space on their
// way to the log. The entry's bytes are the same as before. The writer never
// waits for more appends: what arrived while one entry was written forms the
// next, so a slow put (20 ms on S3) gathers more appends per entry by
// itself, and a fast one does not hold an append back. Waiting to form
// larger groups pays only where a group has a fixed cost beyond its write:
// building one Arrow batch of many callers' rows. That is the caller's
// (package rollout's append queue, with the only window and group bounds;
// it hands each group over as one AppendGroup), so there is one group
// commit, not two in series. lance_context_wal_entry_appends observes the
// appends (callers) per entry.
//
// A full memtable is sealed in the background: its generation file is
// written off the writer goroutine, which keeps appending and commits the
// generation to the manifest when the file is done (at most one seal in
// flight; a second full memtable waits for it). A failed seal puts its rows
// back in front of the memtable. Seal (flush) answers once every row
// acknowledged before it is in a committed generation; a Seal that arrives
// while a seal is in flight is served by the seal started as soon as that
// one commits, and appends go on meanwhile.
//
// A writer resolves every position before using the next one. When a put
// fails ambiguously (an error, which may hide a lost acknowledgement), the
// next attempt first reads that position back: if an entry is there it is
// taken as written. So the log never has a gap, and replay (read positions
// replay_after+1, +2, ... until the first absent one) sees every entry.
// Replay reads its first position beside a listing of the entries, fetches
// the entries the listing shows ahead, 32 at a time in parallel, and adopts
// them in position order as if read one by one; the position after them is
// read beside a listing again. The first position absent when fetched ends
// it, as before, and the listing taken beside that read is the one that
// tells a gap (entries above it) from the log's end.
//
// Every entry in the log is valid, whatever its epoch: a deposed writer may
// have acknowledged it. The owner that finds another writer's entry at its
// next position (put-if-absent says "exists") adopts it into its memtable and
// moves on. Only the epoch decides who may acknowledge.
//
// # Segment log (local filesystem)
//
// Where Options.Log names a directory (the catalog gives one when a store's
// data is on a local filesystem; see Log) entries are not objects: a writer
// appends them as frames to segment files of its own epoch, and one data
// flush (fdatasync) makes a frame durable. A put-if-absent costs a new
// inode, a link and two flushes; overwriting preallocated blocks costs one
// flush and no metadata, a third to a half of the time on the machines we
// measured. A frame is
//
//	position uint64 LE | length uint32 LE | CRC-32C uint32 LE of the 12
//	bytes before it and the payload | payload (the entry, as above)
//
// Segments are allocated to their size (fallocate; zero-filled where the
// filesystem cannot allocate) and made to exist under their name
// (directory flushed) before a frame goes in; the next one is prepared in
// the background while the current one fills. The first flush into a new
// block commits the journal (the extent becomes written); a reused segment
// (a spare, below) is written already, so a frame's flush changes no
// extents. Zero-filling new segments instead made every frame flush a data
// flush alone, but wrote each new segment twice, and its writes lengthened
// the flushes of frames more than the journal commits do. A writer's first segment is
// 1 MiB and each next one four times the last, up to SegmentBytes
// (default 64 MiB): a first append waits milliseconds, and a quiet store
// holds 1 to 5 MiB. A frame that does not fit starts the next segment (a
// frame larger than a segment goes alone and grows it). After a seal,
// closed segments whose frames are all at or below replay_after are
// collected: up to four (none sealed in place) are kept, renamed to .spare, and become later
// segments (grown with zeros if smaller). Their old frames stay behind the
// new ones until overwritten. The next segment is prepared as soon as a
// spare exists, else once the current one is a quarter full (or full): a
// seal that completes meanwhile hands over a spare instead of a new file
// (and, without fallocate, a new file's zero-fill stops for a spare that
// arrives during it).
//
// Frames are written by direct IO (O_DIRECT) where the file system takes
// it (direct.go; Options.BufferedLog turns it off): a frame is assembled
// in an aligned buffer after room for the segment's last partial block
// (its tail, kept in memory); the write copies the tail into that room,
// zero-pads the frame to a whole block and writes it all at the tail's
// block; the data flush follows as before. Through the page
// cache a frame cost a copy into fresh pages of it, which on a virtual
// machine that returns free memory to its host was most of an append's CPU
// (a 1 KB record's JSON batch append: 163k to 284k records/s; Arrow:
// 248k to 497k). The write repeats the tail block's bytes, as the page
// cache's write-back of a partial page did, so a torn write of it leaves
// each sector holding the old bytes or the same ones again: frames already
// acknowledged are never at stake. The zeros after the frame are what an
// allocated block reads as, or overwrite a spare's stale frames, which
// replay would skip anyway. Readers of a segment (replay, a generation
// sealed in place, a merge) read through the page cache; the kernel drops
// the pages a direct write overlaps. A file system that takes O_DIRECT but
// refuses a write (EINVAL: an alignment larger than 4 KiB) has written
// nothing; the segment then writes that frame, and the rest, through the
// page cache.
//
// Replay reads, after any object entries, the segments of epochs >=
// log_epoch in (epoch, seq) order, frame by frame: a frame at a position
// below the next expected one is skipped (sealed, or from the file's earlier
// life), the expected one is adopted. Where a file's frames stop (zeros of
// preallocation, a torn write, a bad checksum, a length past the end, the
// cut remains of the file's earlier frames) the rest of the file is
// searched byte by byte for a valid frame at the expected position or
// beyond; without one the log goes on at the start of the next file or
// ends there. (So a claim reads each segment to its end: about 0.1 s per
// 64 MiB of preallocated zeros, skipped a word at a time.) Positions stay dense across files because a writer writes
// one frame at a time and starts the next only after the last is durable.
//
// # Seal in place
//
// Where the store's objects are the files of the log's directory
// (Log.Objects: rollout's WALLog, a store on local disk) a full memtable's
// segment becomes its generation file instead of the seal writing a copy,
// so a record is written once before the merge, not twice. The frames
// already hold the rows' large value runs: an appender's record batch
// message references its buffers (entry.go), so the frame holds each
// binary column's values as one contiguous run. After writing a frame the
// log notes, for every binary array of the entry's batches whose value run
// is at least placeMin (1 KiB) long, where in the segment that run is
// (notePlaced: the frame's large pieces are found by their address among
// the pieces of that frame alone, all alive, so an address names one
// buffer).
//
// A seal (startSeal) whose memtable has at least minInPlaceBytes (1 MiB)
// of noted runs in the current segment takes that segment (cut): the next
// frame starts a new one, and the segment is never made a spare. The seal
// then writes, after the segment's last frame, what the frames lack: the
// generation's Lance data with the noted runs as the bytes buffers of their
// pages (lance/file's WriterOptions.Placed: only their end offsets are
// written), and everything else (small columns, rows a newer write of
// their key replaced, filtered and so written anew, rows whose frames are
// in an earlier segment, the sequence column) as usual. It truncates the
// file there (the rest of the preallocation), flushes it (fsync), and
// links it into gen/ under the generation's name, flushing gen/. The
// segment keeps its own name: until the manifest lists the generation its
// frames are the log's, and replay reads them as before (after the last
// frame it finds no valid frame in the Lance bytes, which is how any
// segment's frames end). Once the manifest commit covers the segment's
// positions, collection unlinks its log name (the generation's stays). A
// seal that fails puts its rows back (the next seal writes them anew); a
// link that no manifest lists is swept like any unlisted generation file.
// Fencing is unchanged: a deposed writer's seal in place writes after
// frames of its own segment (which a claim replays through the log name,
// the Lance bytes after them read as the end of its frames) and links a
// file that no manifest will list, since its commit is fenced.
// A smaller memtable (a flush of a few rows) is sealed into a new file
// and leaves the segment as it is. Where the log's segments are sealed in
// place they are sized to hold a full memtable (MaxMemtableBytes + 1/4, when
// SegmentBytes is not set), after the first four. Power cuts at every step
// (TestPowerCutsSealInPlace) and kill -9 (rollout's TestCrashKill9,
// local-inplace) check that nothing acknowledged is lost or read twice.
//
// A generation sealed in place is a Lance file whose first bytes are WAL
// frames no page references; the byte size in its manifest entry counts
// them.
//
// # Corruption
//
// So the log can only be cut short, never holed: a crash loses at most
// the frame being written (a torn tail, which replay truncates, as it
// would a frame never written). A valid frame beyond the expected position
// (in the same file after bad bytes, or in a later file) means the frames
// in between were damaged or lost after they were durable, and possibly
// acknowledged: replay does not skip them but fails with a
// *CorruptionError (errors.Is ErrCorrupt) naming the segment, the offset
// where the readable frames stop, the first unreadable position and the
// next valid one. Before it says so it reads the damaged frame again, since
// a deposed writer may have been writing it. Damage to the last frame is
// indistinguishable from a torn tail and is truncated.
//
// In the object log puts are atomic, so there is no torn tail: an entry
// that does not decode, lacks the IPC end-of-stream marker (an entry cut at
// a message boundary still decodes), or names another shard or position is
// a *CorruptionError wherever it is, and so are entries above an absent
// position (a writer never leaves a gap).
//
// A claim of a corrupt log fails; nothing of the shard is served until
// Repair (the command "lance-context wal repair") truncates the log at the
// damage: the damaged segment is cut at the offset, every later segment at
// its first frame at or beyond the damaged position, and object entries
// from that position on are deleted. It reports every valid entry it drops
// (position, rows, place): they are lost for good, so the report is what to
// reconcile against the clients' records.
//
// If a write or flush fails the writer stops (ErrLogFailed): what reached
// the disk is unknown, so it never writes that position again; a new claim
// replays what is durable.
//
// A full disk or quota (ENOSPC, EDQUOT: ErrNoSpace) is not such a failure
// where nothing was written. A segment that cannot be allocated at its
// size is allocated a quarter as large, and so on down to 256 KiB; a frame
// larger than a segment has its blocks allocated before it is written.
// When not even that fits, the append fails with ErrNoSpace, the position
// stays unused and the writer goes on: the next append prepares again and
// succeeds as soon as space is freed, without a new claim.
//
// Fencing is the manifest check below, unchanged; segments only need that
// writers of different epochs never share a file. A claim, after replaying
// and sealing, commits log_epoch = its epoch: from then on the segments of
// earlier epochs are dead, and the claim deletes them. A deposed writer
// may keep writing into its own files (or into files it creates, or into
// unlinked ones); it cannot acknowledge, and no one reads those frames.
// Why no acknowledged frame is lost: a writer acknowledges a frame only
// after it is durable and manifest version v+1 is still absent, so the
// frame was in a file under its durable name before the claim, which
// lists the directory after its manifest write. A writer reuses only its own
// segments whose frames are all sealed (at or below a replay_after it
// committed, which no later claim lowers), so a claim reading a file that
// is being reused skips stale frames by position and never needs the new
// ones (written after the claim, so never acknowledged). This relies on a
// local filesystem's coherence (one page cache); shared network
// filesystems are not supported for the data directory.
//
// # Fencing
//
// Claim writes manifest version v+1 with epoch e+1, then replays and seals.
// Every manifest write by a writer is a put-if-absent of (its last known
// version)+1; if that name exists, another writer claimed the shard and this
// one is fenced: it stops and fails everything queued with ErrFenced. A
// writer's last known version v is the last it committed, so version v+1,
// if it exists, is a claim's: the manifest lists the versions that claimed
// ("claims") and collection never deletes them.
//
// Segment log. Before acknowledging an entry at position p, the writer
// checks that manifest version v+1 does not exist (a local stat). Either
// the claim happened before the check, and the writer sees it and does not
// acknowledge; or it happened after, and then the entry at p was durable
// before the claim, so the new owner's replay, which starts after the
// claim, reads it.
//
// Object log: the put is the check. On an object store that check is a
// second round trip after the put, and it cannot be overlapped with the
// put: a check answered before the put lands says nothing about a claim
// made between the two (the put may be stalled in the writer, the network
// or the server for as long as the claim, a seal and a collection take).
// Instead a claim fences the deposed writer in the log itself. A claim of
// an epoch above 1 (the first epoch has no predecessor) replays up to the
// first free position a, then puts a fence entry there: an entry with no
// batches, put-if-absent like any other. If the name is taken (a put that
// landed after replay looked), it adopts that entry and tries a+1. The
// fence entry's position is recorded in the manifest ("fences", from the
// claim's first commit on, and by any writer that adopts it) and is never
// collected, nor are the claim versions: one small object and two numbers
// per claim, for as long as the shard lives. A writer of the object log
// then acknowledges an entry when its put-if-absent creates it (or finds
// its own bytes there after a lost reply), without a fence check:
//
//   - Let W be a writer with last known version v at position q (every
//     position below q resolved: written by W or adopted), and C the first
//     claim after v, with fence entry at m. C's replay read positions
//     R+1.. (R is v's replay_after, the start of W's positions) until a
//     free one; those below q exist (nothing deletes above R without first
//     replaying them), so q <= a <= m.
//   - q = m: W's put either landed first, and then C adopted it (replay, or
//     its fence put found it), or it meets the fence entry, which is an
//     entry of a newer epoch: W is fenced. The fence entry is never
//     deleted, so a put stalled for any time still meets it.
//   - q < m: position q existed when C replayed it, and only W writes at
//     W's next position (older writers are held below W's own claim's
//     fence; newer ones start above m). So W's put at q is a retry of
//     the same bytes (retries repeat the same entry, and whichever copy C
//     adopted holds the rows W acknowledges), or a new entry put after an
//     ambiguous failure found the position free, which is the case below.
//   - q > m: W reached it only by writing at m, which it cannot.
//
// When an ambiguous put's position is later found free, a successor may
// have adopted the lost entry, sealed it and collected the name: a put
// there lands where no replay looks. Such a put is followed by the fence
// check as on the segment log (TestReusedPositionIsFenceChecked); and
// one found to hold an entry of a newer epoch (a fence entry) fences the
// writer, which must not adopt it and write on past it unchecked
// (TestPendingResolvesToFence). The
// races of this argument have tests: a claim between a writer's put and its
// acknowledgement (TestClaimBetweenPutAndAck), a put landing between a
// claim's replay and its fence entry (TestDeposedPutLandsBeforeFence), a
// put stalled across a claim, a seal and a collection
// (TestStalledWriterAfterGC); an append costs one request
// (TestAppendIsOneRequest).
//
// # Owners and heartbeats
//
// The epoch decides who may write; it cannot tell a crashed owner from a
// live one, and two live processes with one instance id (one shard) would
// each fence the other at every write and claim the shard back. So a
// claim records its Owner in the manifest (a random id per process, its
// instance id, host and pid, and whether it is an orphan merge), and an
// owner that is not a merge writes a heartbeat right after its claim
// commits (beside the replay, with the hint; both land before the claim's
// seal) and renews it every HeartbeatInterval (default 3 s) while it
// holds the shard:
//
//	{"owner": {...}, "epoch": 3, "seq": 41, "renewed_at": "...",
//	 "interval_ms": 3000, "ttl_ms": 8000, "released": false}
//
// at heartbeat/{epoch}.json: only the writer of that epoch writes its
// file, so a deposed writer never overwrites its successor's. A fenced
// or failed writer stops renewing; Close (and a claim that fails) marks
// it released; a crash leaves it as it was. A claim deletes the
// heartbeats of earlier epochs. ReadHolder reads the latest manifest's
// owner (listing the manifests, as a claim does) and its epoch's
// heartbeat; a claim given that Holder (Options.Holder) builds its first
// attempt on the manifest read there, and a commit since makes the
// attempt fail and the claim read again. A claim writes the shard's
// registration (_shards/) beside that read; it lands before the commit.
// A process deciding whether to claim
// (package rollout) takes the holder for alive while it shows signs of
// life (a renewal, a commit, a claim that fenced it) within ttl_ms, and
// for dead once it has shown none for ttl_ms: then, and for an orphan
// merge (which the owner takes back), a released shard or its own
// process, it claims. The heartbeat decides only whether to claim, never
// whether a write is safe: that stays the epoch's, above, so a wrong
// guess (a clock far off, a stalled owner) costs a claim, never a write.
//
// # Sequence numbers
//
// Every acknowledged row has a sequence number in its shard (seq.go): its
// entry's position << SeqShift (24), plus its row number within the entry
// across the entry's batches. Positions are dense, never reused, and a
// replayed entry is adopted at its own position, so the number is fixed
// when the entry becomes durable and survives seals, claims and restarts.
// The memtable keeps each batch's first number; a seal writes them into
// Options.SeqColumn of the generation (after dropping rows a newer write
// of the same key replaced), so a generation's rows are in ascending
// sequence order. An entry holds at most MaxEntryRows rows (an append of
// more is refused; the group commit starts a new entry before it would
// pass the bound). Writer.Tail serves the acknowledged rows not yet in a
// published generation, with their numbers, for readers that must see a
// row as soon as it is acknowledged (package rollout's feed).
//
// # Reading generations: newest wins
//
// A generation is an immutable Lance data file of the rows of one sealed
// memtable, with the store's row schema. Its manifest entry carries its
// row count, byte size, key range (min_id, max_id) and seal time.
//
// One rule decides which write of a key is its newest, and every reader of
// the tier goes through it (Newest): writes are offered newest first and
// the first offer of a key wins. The order is: within a memtable or a
// generation, later rows are newer; within a shard, higher generation
// numbers are newer; across shards the later seal time wins, and at equal
// times the shard listed later (NewestFirst). So a seal keeps only the
// newest row of each key, and a generation holds each key at most once.
//
// LoadGeneration reads a generation into memory (the columns asked for,
// brought to the caller's shape by a projection) with an index from each
// key to its newest row (LoadedGeneration: Key, Lookup). On it:
//
//	NewestRows    the newest row of every key in a set of loaded
//	              generations (a list of the tier)
//	FindNewest    the newest row of one key, loading generations newest
//	              first and only those whose key range may hold it (get)
//	StreamNewest  every generation of a merge read once, newest first,
//	              handed over with its winning rows, a few read ahead
//	              concurrently: memory holds those and the key set
//
// A file of up to 1 MiB, or any file a reader wants whole (a merge), is
// read with one request; a larger one range by range.
//
// # Garbage collection, and why a stalled writer cannot lose an acknowledged write
//
// After a seal commits replay_after = R, object entries at positions <= R are
// deleted, fence entries excepted (without a directory sync: one that comes
// back after a crash is at or below R, and the next claim's sweep deletes it
// again). Manifest versions more than 16 behind the hint are deleted, claim
// versions excepted. A claim whose replay found only fence entries after R
// seals no rows; its writer then commits R past them as its loop starts
// (passRowless), so that claims of a store restarted while idle do not
// replay the fences of every claim before them. Nobody reads an entry at or below R but a deposed
// writer, which can no longer acknowledge; and an entry names its shard and
// position, so a reader refuses one found under another position's name.
// The known hazard: a writer stalled since before the claim wakes up and
// puts an entry at a position p <= R that GC already deleted; the
// put-if-absent succeeds (the name is free again), but no replay will ever
// read p, since replay starts after R. If that writer acknowledged, the
// write would be lost. It cannot: on the object log, p is at or below the
// claim's fence entry, which is never deleted, and p below it only after an
// ambiguous put, whose reuse is checked (above); on the segment log, R was
// recorded by a manifest version newer than anything that writer has seen
// (it never sealed p itself, or it would not write p again), so its
// pre-acknowledgement check finds the claim's version v+1, which is never
// collected, and the writer is fenced instead. The entry it leaves behind
// is never acknowledged and never read. TestStalledWriterAfterGC and
// TestReusedPositionIsFenceChecked cover it.
//
// Generation files are deleted only after a merge has committed them into the
// base table together with the shard's merge watermark and the shard manifest
// has dropped them (DropGenerations); readers skip generations at or below
// the watermark, so a crash between those steps leaves reads correct. A
// crash or a failed delete after the drain, or a seal whose manifest commit
// failed, leaves files the manifest does not list; the first drop after a
// claim or after such a failure sweeps gen/ and deletes every file numbered
// at or below the watermark it drops to that the manifest does not list
// (each such generation is either in the base table or was never visible).
//
// # Code
//
// writer.go: options, the Writer and its methods; claim.go: claiming a
// shard, its fence entry, and replay; loop.go: the writer goroutine and
// group commit; put.go: putting entries, adopting others' and the fence
// check; generation.go: writing and loading generations, StreamNewest;
// newest.go: the newest-wins rule and the lookups on it; entrylog.go: the
// entryLog interface of the object log and the segment log; seal.go: the seal
// pipeline and the memtable; inplace.go: sealing a segment in place;
// hints.go: manifest hints; gc.go: collection;
// drop.go: dropping merged generations; owner.go: owners, heartbeats and
// ReadHolder; segment.go: the segment log (its files through package vfs)
// and CheckSpace; corrupt.go: reading logs so that damage is reported, not
// skipped; repair.go: Repair; metrics.go: the instruments.
package wal
