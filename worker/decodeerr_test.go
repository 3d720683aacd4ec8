package worker

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Regression: messages that named Go types or said nothing useful. Each
// bad body gets a 400 whose message names the place and what to send.
func TestRegression_RecordErrorMessages(t *testing.T) {
	s := &Server{}
	cases := []struct{ name, body, want, not string }{
		{"a bare array", `[{"rollout_id":"r"}]`, `send one object {"records": [...]}, got an array: wrap the array`, "Go value"},
		{"a string", `"hello"`, `send one object {"records": [...]}, got the string "hello"`, "Go value"},
		{"an element of a token array", `{"records":[{"rollout_id":"r","output_tokens":[1,"a"]}]}`,
			`record 0: field "output_tokens[1]" must be an integer (int32), got the string "a"`, "got an array"},
		{"a float32 overflow", `{"records":[{"rollout_id":"r","reward":1e40}]}`,
			`field "reward" is 1e40, outside the range of a float32`, "must be a number, got the number"},
		{"an int32 overflow", `{"records":[{"rollout_id":"r","sequence_order":3000000000}]}`,
			`field "sequence_order" is 3000000000, outside the range of an int32 (-2147483648 to 2147483647)`, "Go value"},
		{"an overflow in an array", `{"records":[{"rollout_id":"r","output_logprobs":[0.5,-1e39]}]}`,
			`field "output_logprobs[1]" is -1e39, outside the range of a float32`, "got an array"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.decodeJSONRecords(strings.NewReader(c.body), -1)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
				t.Fatalf("got %v, want a message with %q", err, c.want)
			}
		})
	}
}

// Regression: POST .../checkout {} answered 404 "version 0": a missing
// version is bad input, a 400 saying to send one.
func TestRegression_CheckoutWithoutVersion(t *testing.T) {
	_, url := lifecycleWorker(t)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/api/v1/rollouts", `{"name":"c"}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, body := range []string{`{}`, `{"version":0}`} {
		code, msg := post("/api/v1/rollouts/c/checkout", body)
		if code != http.StatusBadRequest || !strings.Contains(msg, `version is required: send {\"version\": N}`) {
			t.Fatalf("checkout %s: %d %s", body, code, msg)
		}
	}
	// A version that does not exist is still a 404.
	if code, msg := post("/api/v1/rollouts/c/checkout", `{"version":99}`); code != http.StatusNotFound {
		t.Fatalf("checkout 99: %d %s", code, msg)
	}
}
