// Package objstore is the object-store abstraction every durable component of
// lance-context writes through, with its backends:
//
//   - local: a directory tree on a POSIX filesystem (NewLocal). Every write is
//     durable on return: the file is fsynced, then its directory (and any
//     directory created for it). PutIfAbsent writes a temporary file
//     (".tmp_*", never listed) in the target directory and hard-links it to
//     the final name, so it is atomic across processes: link(2) fails with
//     EEXIST when the name exists and never replaces it. Put and Create
//     rename a temporary file over the name. Discard (the Discarder
//     interface) deletes without the directory sync, for garbage whose
//     return after a crash is harmless.
//   - memory: a map guarded by a mutex (NewMemory), for tests and "mem://".
//   - s3: Amazon S3 and S3-compatible servers via aws-sdk-go-v2 (NewS3).
//     PutIfAbsent is PutObject with "If-None-Match: *"; Create uses a
//     multipart upload (parts of PartSize, default 8 MiB) or, for an object
//     smaller than one part, a single PutObject.
//   - gcs: Google Cloud Storage via cloud.google.com/go/storage (NewGCS).
//     PutIfAbsent is an upload with the precondition ifGenerationMatch=0
//     (storage.Conditions{DoesNotExist: true}); Create is a resumable
//     upload in chunks of ChunkSize, finalized (made visible) on Close.
//   - azure: Azure Blob Storage block blobs via azblob (NewAzure).
//     PutIfAbsent is Put Blob with "If-None-Match: *"; Create stages blocks
//     and commits the block list on Close.
//   - faulty: a seeded, replayable fault-injecting wrapper (NewFaulty),
//     and its counterpart on the wire for the cloud backends, a transport
//     that tears response bodies (NewTearingTransport).
//
// Sub gives a view of a store rooted at a prefix, and Open picks a backend
// from a URL: "s3://bucket/prefix", "gs://bucket/prefix",
// "az://container/prefix", "mem://name", or a filesystem path (optionally
// "file://path"). Counting wraps a store to count its requests.
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
// SmallFiles wraps a store so that small immutable objects it selects (a
// rollout store's index files) are read whole with their first Head (or
// GetTail) and then served from memory; its Preload reads several of them
// in one parallel wave.
//
// The cloud backends retry PutIfAbsent themselves, not through their SDKs,
// so that they know when an attempt failed after it may have been written;
// see Store.PutIfAbsent for that case. They retry reads (Get, GetRange,
// GetTail) themselves too, so that a body torn mid-way (a connection
// reset) is resumed: the next request asks only for the bytes still
// missing, conditional on the first answer's ETag (GCS: its generation),
// instead of the read failing or starting over. Transient statuses (408,
// 429, 5xx) and transport errors are retried in the same budget: five
// failed requests, none retried 20 s after the first failure, and the
// caller's ctx (retry.go, readResuming). GCS's client also resumes a torn
// body by itself, one request each time. TearingTransport injects such
// tears into a driver's HTTP transport. Their endpoints can be overridden
// from the environment for emulators: AWS_ENDPOINT_URL (versitygw),
// STORAGE_EMULATOR_HOST (fake-gcs-server), AZURE_STORAGE_ENDPOINT or a
// connection string (Azurite). Credentials: the AWS SDK's default chain;
// Google Application Default Credentials; for Azure a connection string
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
