// Package s3 is the objstore driver for Amazon S3 and S3-compatible
// servers (versitygw in the tests), on aws-sdk-go-v2. Importing it
// registers the scheme "s3" with objstore, so objstore.Open answers
// "s3://bucket/prefix" with a Store configured by ConfigFromEnv; New makes
// one from an explicit Config.
//
// PutIfAbsent is PutObject with "If-None-Match: *", retried here rather than
// by the SDK so that a retry that finds the key taken by its own earlier
// attempt (a lost acknowledgement) is told apart by reading the object
// back. Create uses a multipart upload (parts of PartSize, default 8 MiB)
// or, for an object smaller than one part, a single PutObject. Reads resume
// a body torn mid-way with a ranged request conditional on the first
// answer's ETag; listings retry a torn page. ListFirst is one
// ListObjectsV2 with max-keys; GetTail one GetObject with a suffix range.
// The retry budget and the rules every backend keeps are in objstore's
// documentation.
package s3
