package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/lance-context/lance-context/api"
)

// The read routes answer with records, and encoding/json spent more CPU on
// them than the read itself: reflection over ~40 fields, then the
// MarshalJSON of each record (its metadata), whose output the encoder
// parsed again to compact it; and a response without a length went out
// chunked, in several writes. appendRecord writes the same bytes that
// json.Marshal writes for an api.Record (TestRecordJSONMatchesEncodingJSON
// holds it to that, byte for byte), in one pass, into a pooled buffer that
// is sent with its Content-Length.

// errUnencodable marks a value encoding/json refuses (a NaN or infinite
// float, a time outside years 0-9999): the caller falls back to
// encoding/json for its error.
var errUnencodable = errors.New("httpapi: value not encodable as JSON")

// appendRecord appends r as json.Marshal encodes it.
func appendRecord(b []byte, r *api.Record) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"rollout_id":`...)
	b = appendString(b, r.RolloutID)
	b = append(b, `,"problem_id":`...)
	b = appendString(b, r.ProblemID)
	b = append(b, `,"dataset":`...)
	b = appendStringPtr(b, r.Dataset)
	b = append(b, `,"sequence_order":`...)
	b = strconv.AppendInt(b, int64(r.SequenceOrder), 10)
	b = append(b, `,"role":`...)
	b = appendString(b, r.Role)
	b = append(b, `,"created_at":`...)
	if r.CreatedAt == nil {
		b = append(b, "null"...)
	} else {
		t, err := r.CreatedAt.MarshalJSON()
		if err != nil {
			return b, errUnencodable
		}
		b = append(b, t...)
	}
	b = append(b, `,"content":`...)
	b = appendStringPtr(b, r.Content)
	b = append(b, `,"content_type":`...)
	b = appendString(b, r.ContentType)
	b = append(b, `,"model_input_string":`...)
	b = appendStringPtr(b, r.ModelInputString)
	b = append(b, `,"model_output_string":`...)
	b = appendStringPtr(b, r.ModelOutputString)
	b = append(b, `,"rationale":`...)
	b = appendStringPtr(b, r.Rationale)
	b = append(b, `,"problem_text":`...)
	b = appendStringPtr(b, r.ProblemText)
	b = append(b, `,"user_metadata":`...)
	b = appendStringPtr(b, r.UserMetadata)
	b = append(b, `,"input_tokens":`...)
	b = appendInts(b, r.InputTokens)
	b = append(b, `,"output_tokens":`...)
	b = appendInts(b, r.OutputTokens)
	b = append(b, `,"num_input_tokens":`...)
	b = appendIntPtr(b, r.NumInputTokens)
	b = append(b, `,"num_output_tokens":`...)
	b = appendIntPtr(b, r.NumOutputTokens)
	for _, f := range [...]struct {
		name string
		v    []float32
	}{{`,"output_logprobs":`, r.OutputLogprobs}, {`,"input_logprobs":`, r.InputLogprobs}, {`,"ref_logprobs":`, r.RefLogprobs}} {
		b = append(b, f.name...)
		if b, err = appendFloats(b, f.v); err != nil {
			return b, err
		}
	}
	b = append(b, `,"loss_mask":`...)
	b = appendInts(b, r.LossMask)
	for _, f := range [...]struct {
		name string
		v    *float32
	}{{`,"advantage":`, r.Advantage}, {`,"reward":`, r.Reward}, {`,"raw_reward":`, r.RawReward}, {`,"score":`, r.Score}} {
		b = append(b, f.name...)
		if b, err = appendFloatPtr(b, f.v); err != nil {
			return b, err
		}
	}
	b = append(b, `,"grader_id":`...)
	b = appendStringPtr(b, r.GraderID)
	b = append(b, `,"include_in_training":`...)
	switch {
	case r.IncludeInTraining == nil:
		b = append(b, "null"...)
	default:
		b = strconv.AppendBool(b, *r.IncludeInTraining)
	}
	b = append(b, `,"exclude_reason":`...)
	b = appendStringPtr(b, r.ExcludeReason)
	b = append(b, `,"policy_version":`...)
	b = appendStringPtr(b, r.PolicyVersion)
	b = append(b, `,"relationships":`...)
	if r.Relationships == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, rel := range r.Relationships {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"target_id":`...)
			b = appendStringPtr(b, rel.TargetID)
			b = append(b, `,"relation":`...)
			b = appendStringPtr(b, rel.Relation)
			b = append(b, `,"weight":`...)
			if b, err = appendFloatPtr(b, rel.Weight); err != nil {
				return b, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(r.BinaryPayload) > 0 {
		b = append(b, `,"binary_payload":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.BinaryPayload)
		b = append(b, '"')
	}
	b = append(b, `,"payload_size":`...)
	if r.PayloadSize == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *r.PayloadSize, 10)
	}
	b = append(b, `,"payload_checksum":`...)
	b = appendStringPtr(b, r.PayloadChecksum)
	b = append(b, `,"artifact_type":`...)
	b = appendStringPtr(b, r.ArtifactType)
	b = append(b, `,"metadata":`...)
	switch {
	case r.Metadata == nil:
		b = append(b, "null"...)
	case json.Valid([]byte(*r.Metadata)):
		// JSON text goes out as that value, compacted and HTML-escaped
		// as encoding/json does with a Marshaler's output.
		b = appendCompactJSON(b, *r.Metadata)
	default:
		b = appendString(b, *r.Metadata)
	}
	return append(b, '}'), nil
}

// appendCompactJSON appends valid JSON text s without insignificant
// whitespace, with <, >, &, U+2028 and U+2029 escaped inside strings.
func appendCompactJSON(b []byte, s string) []byte {
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inStr {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inStr = true
			}
			b = append(b, c)
			continue
		}
		switch {
		case c == '\\':
			b = append(b, c, s[i+1]) // valid JSON: an escape has its next byte
			i++
		case c == '"':
			inStr = false
			b = append(b, c)
		case c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
			i += 2
		default:
			b = append(b, c)
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string as encoding/json writes it: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid
// UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

func appendIntPtr(b []byte, v *int32) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*v), 10)
}

func appendInts[T int8 | int32](b []byte, vs []T) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, ']')
}

func appendFloats(b []byte, vs []float32) ([]byte, error) {
	if vs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	var err error
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendFloat(b, v); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func appendFloatPtr(b []byte, v *float32) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	return appendFloat(b, *v)
}

// appendFloat appends f as encoding/json writes a float32: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from 1e21,
// with a one-digit negative exponent unpadded.
func appendFloat(b []byte, f float32) ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return b, errUnencodable
	}
	fmt := byte('f')
	if abs := float32(math.Abs(float64(f))); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmt = 'e'
	}
	b = strconv.AppendFloat(b, float64(f), fmt, -1, 32)
	if n := len(b); fmt == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

// bufPool holds response buffers; a buffer grown past maxPooledBuf by a
// large page is left to the collector.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const maxPooledBuf = 1 << 20

// writeRecords writes head, the records as a JSON array, then tail, with
// status 200 and its Content-Length; on a value encoding/json refuses it
// falls back to WriteJSON of v, which answers as before.
func writeRecords(w http.ResponseWriter, head string, recs []api.Record, tail func([]byte) []byte, v any) {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf {
			bufPool.Put(bp)
		}
	}()
	b := append((*bp)[:0], head...)
	b = append(b, '[')
	var err error
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendRecord(b, &recs[i]); err != nil {
			*bp = b
			WriteJSON(w, http.StatusOK, v)
			return
		}
	}
	b = append(b, ']')
	b = tail(b)
	*bp = b
	writeBody(w, b)
}

// writeBody sends b (a JSON document ending in a newline) with status 200.
func writeBody(w http.ResponseWriter, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeGetRecord writes api.GetRecordResponse{Record: rec}.
func writeGetRecord(w http.ResponseWriter, rec *api.Record) {
	if rec == nil {
		writeBody(w, []byte("{\"record\":null}\n"))
		return
	}
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf {
			bufPool.Put(bp)
		}
	}()
	b := append((*bp)[:0], `{"record":`...)
	b, err := appendRecord(b, rec)
	*bp = b
	if err != nil {
		WriteJSON(w, http.StatusOK, api.GetRecordResponse{Record: rec})
		return
	}
	b = append(b, "}\n"...)
	*bp = b
	writeBody(w, b)
}

// writeTrajectory writes api.TrajectoryResponse of rolloutID and recs.
func writeTrajectory(w http.ResponseWriter, rolloutID string, recs []api.Record) {
	head := appendString([]byte(`{"rollout_id":`), rolloutID)
	head = append(head, `,"records":`...)
	writeRecords(w, string(head), recs, func(b []byte) []byte {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(len(recs)), 10)
		return append(b, "}\n"...)
	}, api.TrajectoryResponse{RolloutID: rolloutID, Records: recs, Count: len(recs)})
}

// writeList writes lr (api.ListResponse).
func writeList(w http.ResponseWriter, lr api.ListResponse) {
	writeRecords(w, `{"records":`, lr.Records, func(b []byte) []byte {
		b = append(b, `,"has_more":`...)
		b = strconv.AppendBool(b, lr.HasMore)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, int64(lr.Limit), 10)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, int64(lr.Offset), 10)
		b = append(b, `,"source":`...)
		b = appendString(b, string(lr.Source))
		if lr.NextCursor != "" {
			b = append(b, `,"next_cursor":`...)
			b = appendString(b, lr.NextCursor)
		}
		return append(b, "}\n"...)
	}, lr)
}
