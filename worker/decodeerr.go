package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
)

// explainRecordsError turns a failed decode of {"records":[...]} into a
// message that names the record, the field, and the expected and given
// types, instead of the decoder's words about Go structs. It runs only on
// the error path: the body is decoded again, record by record, with
// encoding/json, whose errors carry the field.
func explainRecordsError(body []byte, cause error) error {
	// Keys are read one at a time, never into a map: a body of millions
	// of distinct keys would cost a map of them on this error path.
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if err == nil {
			// A JSON value other than an object: the decoder's words
			// name Go types ("cannot unmarshal array into Go value of
			// type struct { Records ... }").
			hint := ""
			if t == json.Delim('[') {
				hint = `: wrap the array as {"records": [...]}`
			}
			return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
				`invalid JSON body: send one object {"records": [...]}, got %s%s`, kindOf(bytes.TrimSpace(body)), hint)
		}
		return cause // not JSON: the decoder's words say where
	}
	var records json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return cause
		}
		if k, _ := t.(string); !strings.EqualFold(k, "records") {
			return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body: unknown field %q: send {\"records\":[...]}", k)
		}
		if err := dec.Decode(&records); err != nil {
			return cause
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(records, &items); err != nil {
		return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body: records must be an array of record objects, got %s", kindOf(records))
	}
	for i, it := range items {
		var w api.RecordJSON
		if err := strictDecode(it, &w); err != nil {
			return httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body: record %d: %s", i, fieldMessage(err, it))
		}
	}
	return cause
}

// strictDecode is json.Unmarshal that refuses fields a record does not
// have, matched as the decoders match them (case-insensitively).
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		known := recordFieldNames()
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				break
			}
			if k, _ := t.(string); !known[strings.ToLower(k)] {
				return fmt.Errorf("unknown field %q", k)
			}
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
		}
	}
	return json.Unmarshal(b, v)
}

// recordFieldNames are the JSON names of a record's fields.
var recordFieldNames = func() func() map[string]bool {
	names := map[string]bool{}
	t := reflect.TypeFor[api.Record]()
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" {
			names[n] = true
		}
	}
	return func() map[string]bool { return names }
}()

// fieldMessage words a record's decode error.
func fieldMessage(err error, record json.RawMessage) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := strings.TrimPrefix(te.Field, "recordFields.")
		var m map[string]json.RawMessage
		given := te.Value
		if json.Unmarshal(record, &m) == nil {
			if raw, ok := m[topField(field)]; ok {
				given = kindOf(raw)
				// An element of an array field: name the element, not the
				// array ("output_tokens[0] ... got the string "a"", not
				// "... got an array").
				if field == topField(field) && te.Type.Kind() != reflect.Slice {
					if i, elem, ok := badElement(raw, te.Type); ok {
						field, given = fmt.Sprintf("%s[%d]", field, i), kindOf(elem)
						raw = elem
					}
				}
				if msg, ok := outOfRange(field, raw, te.Type); ok {
					return msg
				}
			}
		}
		return fmt.Sprintf("field %q must be %s, got %s", field, expected(te.Type), given)
	}
	return syntaxMessage(err)
}

// badElement returns the first element of the JSON array raw that does
// not decode as t, and its index.
func badElement(raw json.RawMessage, t reflect.Type) (int, json.RawMessage, bool) {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return 0, nil, false
	}
	for i, e := range elems {
		if json.Unmarshal(e, reflect.New(t).Interface()) != nil {
			return i, e, true
		}
	}
	return 0, nil, false
}

// outOfRange words a number too large for its field's type: reward 1e40
// is a number, and "must be a number, got the number 1e40" said nothing.
func outOfRange(field string, raw json.RawMessage, t reflect.Type) (string, bool) {
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return "", false // not a number, or beyond even a float64
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float32:
		return fmt.Sprintf("field %q is %s, outside the range of a float32 (magnitude at most 3.4e38)", field, string(raw)), true
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
		if f != float64(int64(f)) {
			return fmt.Sprintf("field %q must be a whole number, got %s", field, string(raw)), true
		}
		return fmt.Sprintf("field %q is %s, outside the range of an %s (%d to %d)", field, string(raw), t.Kind(), lo, hi), true
	}
	return "", false
}

// topField is the record field a nested path (relationships.0.weight)
// starts with.
func topField(path string) string {
	top, _, _ := strings.Cut(path, ".")
	return top
}

// expected names a Go type the way the API documents it.
func expected(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return fmt.Sprintf("an integer (%s)", t.Kind())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array of " + expected(t.Elem())
	case reflect.Struct:
		if t.Name() == "Time" {
			return "an RFC 3339 timestamp string"
		}
		return "an object"
	}
	return t.String()
}

// kindOf names the JSON type of a value.
func kindOf(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid JSON"
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case float64:
		return "the number " + string(raw)
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case []any:
		return "an array"
	}
	return "an object"
}

func syntaxMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}
