// Package drivers registers every cloud driver of objstore when imported:
// objstore/s3 ("s3://"), objstore/gcs ("gs://") and objstore/azure
// ("az://"). A program that opens stores by URL from its users (the
// lance-context command, benchmarks, tests against emulators) imports it
// for its side effect:
//
//	import _ "github.com/lance-context/lance-context/objstore/drivers"
//
// The engine's packages import none of the drivers, so a program links a
// cloud SDK only where it asks for it (see TestEngineLinksNoCloudSDK in
// objstore). The drivers' shared conformance, fault and emulator tests
// live in this package's tests.
package drivers

import (
	_ "github.com/lance-context/lance-context/objstore/azure" // "az://"
	_ "github.com/lance-context/lance-context/objstore/gcs"   // "gs://"
	_ "github.com/lance-context/lance-context/objstore/s3"    // "s3://"
)
