package api

// ErrorResponse is the body of every error answer:
// {"error":{"code":"NOT_FOUND","message":"..."}}. The message says what to
// fix; the code is stable.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of ErrorResponse.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes. The first six are the reference's, spelled as it spells
// them; the rest are ours.
const (
	CodeNotFound             = "NOT_FOUND"              // 404
	CodeAlreadyExists        = "ALREADY_EXISTS"         // 409
	CodeInvalidRequest       = "INVALID_REQUEST"        // 400: the message says what to fix
	CodeInternal             = "INTERNAL"               // 500
	CodeCompactionInProgress = "COMPACTION_IN_PROGRESS" // 409
	CodeConflict             = "CONFLICT"               // 409: a concurrent change got in the way; retry
	CodeOverloaded           = "OVERLOADED"             // 503 with Retry-After: merge, then retry

	CodeUnauthorized          = "UNAUTHORIZED"            // 401
	CodeMethodNotAllowed      = "METHOD_NOT_ALLOWED"      // 405
	CodePayloadTooLarge       = "PAYLOAD_TOO_LARGE"       // 413
	CodeUnsupportedMediaType  = "UNSUPPORTED_MEDIA_TYPE"  // 415
	CodeUnavailable           = "UNAVAILABLE"             // 503 with Retry-After: fenced or closing writer
	CodeTimeout               = "TIMEOUT"                 // 503 with Retry-After
	CodeStorageUnavailable    = "STORAGE_UNAVAILABLE"     // 503 with Retry-After: the object store failed
	CodeWALCorrupt            = "WAL_CORRUPT"             // 503: the store's WAL is damaged; the message names where and the repair command
	CodeQueryLimit            = "QUERY_LIMIT"             // 422: a SQL query hit a limit; the message names it and its value
	CodeNotImplemented        = "NOT_IMPLEMENTED"         // 501: a binary built without SQL (cgo off)
	CodeInsufficientStorage   = "INSUFFICIENT_STORAGE"    // 507 with Retry-After: the disk or quota is full; nothing was stored
	CodeShardClaimedElsewhere = "SHARD_CLAIMED_ELSEWHERE" // 503 with Retry-After: another live process runs with this worker's instance id
)
