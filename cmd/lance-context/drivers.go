package main

// The cloud drivers: every verb that takes a data directory opens it with
// objstore.Open, which answers s3://, gs:// and az:// URLs through the
// drivers this import registers (objstore/s3, objstore/gcs,
// objstore/azure). The engine's packages import none of them.
import _ "github.com/lance-context/lance-context/objstore/drivers"
