// Package gcs is the objstore driver for Google Cloud Storage
// (fake-gcs-server in the tests), on cloud.google.com/go/storage with JSON
// API reads. Importing it registers the scheme "gs" with objstore, so
// objstore.Open answers "gs://bucket/prefix" with a Store configured by
// ConfigFromEnv (STORAGE_EMULATOR_HOST); New makes one from an explicit
// Config.
//
// PutIfAbsent is an upload with the precondition ifGenerationMatch=0,
// retried here so that a lost acknowledgement is recognised by reading the
// object back. Create is a resumable upload in chunks of ChunkSize
// (default 8 MiB), made visible on Close. Reads resume a torn body from
// the byte reached, pinned to the first answer's generation. ListFirst is
// one objects.list with maxResults; GetTail one read with a suffix range.
// The retry budget and the rules every backend keeps are in objstore's
// documentation.
package gcs
