package worker

import (
	"strings"
	"testing"

	"github.com/lance-context/lance-context/api"
)

// TestRegression_InvalidUTF8InAKeyNamesItsObject: text that is not UTF-8
// in a JSON append is a 400 that names where it is and stores nothing of
// the request. A bad byte in a key used to be named by the rest of the
// body (field "metadata.\"k\\xff\\\":1}}]}\""): the key is read to the
// end of the body when its bad byte stops the scan.
func TestRegression_InvalidUTF8InAKeyNamesItsObject(t *testing.T) {
	srv := hostileServer(t, hostileConfig())
	recs := "/api/v1/rollouts/s/records"
	for _, c := range []struct {
		name, body, where string
	}{
		{"a metadata key", "{\"records\":[{\"rollout_id\":\"r\",\"metadata\":{\"ok\":1,\"k\xff\":1}}]}", `record 0, field "metadata.<key>" (a key name) is not valid UTF-8`},
		{"a nested key", "{\"records\":[{\"rollout_id\":\"r\"},{\"rollout_id\":\"r\",\"user_metadata\":{\"a\":[{\"\xc0x\":true}]}}]}", `record 1, field "user_metadata.a[0].<key>" (a key name) is not valid UTF-8`},
		{"a record key", "{\"records\":[{\"rollout_id\":\"r\",\"con\xfftent\":\"x\"}]}", `record 0, field "<key>" (a key name) is not valid UTF-8`},
		{"a key with an escaped lone surrogate", `{"records":[{"rollout_id":"r","metadata":{"k\ud800":1}}]}`, `record 0, field "metadata.<key>" (a key name) is not valid UTF-8`},
		{"the top-level key", "{\"rec\xffords\":[]}", `field "<key>" (a key name) is not valid UTF-8`},
		{"a value after a valid record", "{\"records\":[{\"id\":\"fine\",\"rollout_id\":\"r\"},{\"rollout_id\":\"r\",\"content\":\"cut \xe2\x9c\"}]}", `record 1, field "content" is not valid UTF-8`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := send(t, srv, "POST", recs, "application/json", nil, []byte(c.body))
			wantError(t, c.name, code, body, 400, api.CodeInvalidRequest, c.where, "send text as UTF-8")
			if strings.Contains(body, "}]}") {
				t.Errorf("%s: the message quotes the rest of the body: %s", c.name, body)
			}
			mp, ctype := multipartBody(t, []byte(c.body))
			code, body = send(t, srv, "POST", recs, ctype, nil, mp)
			wantError(t, c.name+" (multipart)", code, body, 400, api.CodeInvalidRequest, c.where)
		})
	}
	if ids := storedIDs(t, srv); len(ids) != 0 {
		t.Fatalf("stored %q from refused requests", ids)
	}
	// Keys that are valid text, escapes included, are keys.
	ok := `{"records":[{"id":"k","rollout_id":"r","metadata":{"\u00e9t\u00e9 \"q\" \\u":1,"😀":2}}]}`
	if code, body := send(t, srv, "POST", recs, "application/json", nil, []byte(ok)); code != 201 {
		t.Fatalf("valid keys: %d %s", code, body)
	}
}
