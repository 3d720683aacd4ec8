package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the worker and master HTTP APIs,
// served at /api/v1/openapi.json. A test checks it against the routes the
// servers mount.
//
//go:embed openapi.json
var OpenAPI []byte
