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
//   - faulty: a seeded, replayable fault-injecting wrapper (NewFaulty).
//
// Sub gives a view of a store rooted at a prefix, and Open picks a backend
// from a URL: "s3://bucket/prefix", "mem://name", or a filesystem path
// (optionally "file://path").
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
// Reads after a successful write see it (S3 is strongly consistent). List
// returns keys in byte order. PutIfAbsent is the only primitive for mutual
// exclusion; see its documentation for the lost-acknowledgement case.
package objstore
