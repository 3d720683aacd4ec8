// Package azure is the objstore driver for Azure Blob Storage block blobs
// (Azurite in the tests), on the azblob SDK. Importing it registers the
// scheme "az" with objstore, so objstore.Open answers
// "az://container/prefix" with a Store configured by ConfigFromEnv (a
// connection string, or an account with a shared key or SAS token); New
// makes one from an explicit Config. Microsoft Entra ID tokens are not
// supported.
//
// PutIfAbsent is Put Blob with "If-None-Match: *", retried here so that a
// lost acknowledgement is recognised by reading the blob back. Create
// stages blocks (BlockSize, default 8 MiB) and commits the block list on
// Close. Reads resume a torn body with a ranged request conditional on the
// first answer's ETag. ListFirst is one List Blobs with maxresults. Azure
// takes no suffix range, so the Store is no objstore.TailReader and a tail
// costs a Head and a ranged read. The retry budget and the rules every
// backend keeps are in objstore's documentation.
package azure
