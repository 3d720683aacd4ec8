// Package objstore is the object-store abstraction every durable component of
// lance-context writes through: the Store interface, the backends that need
// no SDK, the wrappers, and a registry of drivers by URL scheme.
//
// What is where:
//
//   - objstore (this package): Store and its optional interfaces; local, a
//     directory tree on a POSIX filesystem (NewLocal); memory (NewMemory);
//     the wrappers Sub, Counting, Faulty and SmallFiles; TearingTransport;
//     and Open, which picks a backend from a URL.
//   - objstore/s3, objstore/gcs, objstore/azure: the cloud drivers, each
//     with its SDK (s3.New, gcs.New, azure.New). Importing one registers
//     its scheme with Register ("s3", "gs", "az"); objstore/drivers
//     imports all three. cmd/lance-context imports objstore/drivers, as do
//     the tests and benchmarks that open cloud stores; the engine's packages
//     (lance/..., wal, rollout, sqlquery, worker, master, coord) import
//     none, so they link no cloud SDK (TestEngineLinksNoCloudSDK).
//   - objstore/internal/driver: what the cloud drivers share (the retries
//     of a conditional put and of a torn read, below; the streaming
//     writer of S3 and Azure, PartWriter, which buffers one part and
//     uploads it through the driver's Multipart; batch deletes).
//   - objstore/internal/sleep: the wait on a context that objstore and
//     the drivers share.
//   - objstore/objstoretest: the conformance suite every backend passes;
//     the cloud drivers' runs of it (against gofakes3 in process and, when
//     configured, versitygw, fake-gcs-server and Azurite) are in
//     objstore/drivers' tests.
//
// The backends:
//
//   - local: every write is durable on return: the file is fsynced, then
//     its directory (and any directory created for it). PutIfAbsent writes
//     a temporary file (".tmp_*", never listed) in the target directory and
//     hard-links it to the final name, so it is atomic across processes:
//     link(2) fails with EEXIST when the name exists and never replaces it.
//     Put and Create rename a temporary file over the name. Discard (the
//     Discarder interface) deletes without the directory sync, for garbage
//     whose return after a crash is harmless. LocalPath says where a key's
//     file is, for a caller that keeps files of its own beside the objects
//     (the catalog places a store's WAL segment log there).
//   - memory: a map guarded by a mutex, for tests and "mem://".
//   - s3: Amazon S3 and S3-compatible servers via aws-sdk-go-v2.
//     PutIfAbsent is PutObject with "If-None-Match: *"; Create uses a
//     multipart upload (parts of PartSize, default 8 MiB) or, for an object
//     smaller than one part, a single PutObject.
//   - gcs: Google Cloud Storage via cloud.google.com/go/storage.
//     PutIfAbsent is an upload with the precondition ifGenerationMatch=0
//     (storage.Conditions{DoesNotExist: true}); Create is a resumable
//     upload in chunks of ChunkSize, finalized (made visible) on Close.
//   - azure: Azure Blob Storage block blobs via azblob. PutIfAbsent is Put
//     Blob with "If-None-Match: *"; Create stages blocks and commits the
//     block list on Close.
//   - faulty: a seeded, replayable fault-injecting wrapper (NewFaulty),
//     and its counterpart on the wire for the cloud drivers, a transport
//     that tears response bodies (NewTearingTransport).
//
// Open picks a backend from a URL: a filesystem path (optionally
// "file://path") or "mem://name", built in, or "scheme://..." for a
// registered driver: "s3://bucket/prefix", "gs://bucket/prefix",
// "az://container/prefix". OpenWith passes an HTTP transport to the driver
// (tests count or tear requests with it). Sub gives a view of a store
// rooted at a prefix; Counting wraps a store to count its requests.
//
// Two optional interfaces save round trips where a backend allows, each
// with a package function that falls back for the others (the wrappers,
// Sub, Counting, Faulty and SmallFiles, pass both on):
//
//   - FirstLister: ListFirst lists the first n keys under a prefix in one
//     request for n up to a page (S3's max-keys, GCS's maxResults, 1000 a
//     page; Azure's maxresults, 5000; local directories), else through
//     List. Readers find the newest of names that sort newest first. A
//     local directory's listing is reused while a stat shows the
//     directory unchanged and quiet since before the listing (dircache.go),
//     so a listing at rest costs a stat, not a read of every name.
//   - TailReader: GetTail reads the last n bytes of an object and its size
//     in one request (a suffix range, "Range: bytes=-n", on S3 and GCS; a
//     stat and a pread on local disk), else with a Head and then a ranged
//     read. Azure Blob Storage takes no suffix range, so it costs those
//     two there. Readers of files whose metadata is at the end (Lance
//     files) learn the size and the metadata together.
//
// Batch deletes: DeleteKeys deletes many keys with the store's DeleteMany
// (BatchDeleter) where it has one, else with Delete, DeleteParallel at a
// time; a failure wraps a *DeleteError naming the keys that may remain
// (NotDeleted). S3 sends DeleteObjects requests of 1000 keys and Azure
// blob batches of 256, four requests at once, an absent key counting as
// deleted; GCS deletes a key a request (its Go client has no batch
// requests). Local disk unlinks every file and then syncs each directory
// once (DiscardKeys, for garbage, syncs none: BatchDiscarder). The
// wrappers pass both on: Sub maps the keys, SmallFiles drops their cached
// copies, Counting counts one OpDeleteMany per 1000 keys, and Faulty draws
// each key's faults as for its Delete (OpDelete), so a hook that fails a
// key's Delete fails it in a batch too.
//
// SmallFiles wraps a store so that small immutable objects it selects (a
// rollout store's index files) are read whole with their first Head (or
// GetTail) and then served from memory; its Preload reads several of them
// in one parallel wave.
//
// The cloud drivers retry PutIfAbsent themselves, not through their SDKs,
// so that they know when an attempt failed after it may have been written;
// see Store.PutIfAbsent for that case. They retry reads (Get, GetRange,
// GetTail) themselves too, so that a body torn mid-way (a connection
// reset) is resumed: the next request asks only for the bytes still
// missing, conditional on the first answer's ETag (GCS: its generation),
// instead of the read failing or starting over. Transient statuses (408,
// 429, 5xx) and transport errors are retried in the same budget: five
// failed requests, none retried 20 s after the first failure, and the
// caller's ctx (objstore/internal/driver: PutIfAbsentRetrying,
// ReadResuming). GCS's client also resumes a torn body by itself, one
// request each time. TearingTransport injects such tears into a driver's
// HTTP transport. The drivers' endpoints can be overridden from the
// environment for emulators: AWS_ENDPOINT_URL (versitygw),
// STORAGE_EMULATOR_HOST (fake-gcs-server), AZURE_STORAGE_ENDPOINT or a
// connection string (Azurite); each driver's ConfigFromEnv lists what it
// reads. Credentials: the AWS SDK's default chain; Google Application
// Default Credentials; for Azure a connection string
// (AZURE_STORAGE_CONNECTION_STRING), or AZURE_STORAGE_ACCOUNT with
// AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN (Microsoft Entra ID tokens
// are not supported).
//
// # Keys
//
// Keys are '/'-separated relative paths such as "_versions/1.manifest". They
// must be non-empty, must not start or end with '/', must not contain empty,
// "." or ".." segments or NUL bytes, and no segment may start with ".tmp_".
// All backends reject other keys with ErrInvalidKey, so a key that works on
// one backend works on all. On local disk a key cannot also be a "directory"
// of another key (both "a/b" and "a/b/c"); the project's layouts never do so.
//
// # Consistency
//
// Reads after a successful write see it (S3, GCS and Azure Blob are
// strongly consistent). List
// returns keys in byte order. PutIfAbsent is the only primitive for mutual
// exclusion; see its documentation for the lost-acknowledgement case.
package objstore
