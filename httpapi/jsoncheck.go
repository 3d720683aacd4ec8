package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/internal/jsonscan"
)

// MaxJSONDepth is the deepest nesting of arrays and objects a JSON request
// body may have. Decoders recurse once per level (segmentio's without a
// bound of its own: ~2.1 million levels overflowed the stack and killed
// the worker); real metadata nests a handful of levels.
const MaxJSONDepth = 256

// MaxJSONValues bounds the values (array elements and object members) of
// one JSON request body: what the decoders allocate grows with it, not
// only with the body's bytes. A 64 MiB body of token ids holds ~10M.
const MaxJSONValues = 1 << 24

// Place words where in a body a path leads, for messages (`field "sql"`);
// "" for the body itself.
type Place func(path []jsonscan.Step) string

// FieldPlace names a path as a field: `field "a.b[2]"`; "" for a path of
// array elements only (a body of nested arrays has no field to name).
func FieldPlace(path []jsonscan.Step) string {
	if !slices.ContainsFunc(path, func(s jsonscan.Step) bool { return !s.InArr }) {
		return ""
	}
	return fmt.Sprintf("field %q", jsonscan.FormatPath(path, 8))
}

// CheckJSON scans a JSON request body before it is parsed, with one byte
// loop: nesting deeper than MaxJSONDepth and strings that are not UTF-8
// (decoders would replace them with U+FFFD, silently) are a 400, more than
// MaxJSONValues values a 413, each naming the limit and where it was hit
// (place words the path; nil uses FieldPlace). itemsDepth is passed on as
// jsonscan.Limits.ItemsDepth, for the caller's own count. Other syntax
// errors are left to the decoder.
func CheckJSON(body []byte, itemsDepth int, place Place) (jsonscan.Stats, error) {
	st, err := jsonscan.Scan(body, jsonscan.Limits{MaxDepth: MaxJSONDepth, MaxValues: MaxJSONValues, ItemsDepth: itemsDepth})
	var se *jsonscan.Error
	if !errors.As(err, &se) {
		return st, err
	}
	if place == nil {
		place = FieldPlace
	}
	where := place(jsonscan.At(body, se.Offset))
	switch se.Kind {
	case jsonscan.TooDeep:
		if where != "" {
			where = " (in " + where + ")"
		}
		return st, Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			"JSON nesting deeper than %d levels at byte %d%s: flatten it", se.Limit, se.Offset, where)
	case jsonscan.TooManyValues:
		return st, Errorf(http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge,
			"JSON body with more than %d values (array elements and object members) at byte %d: send smaller batches", se.Limit, se.Offset)
	}
	if where == "" {
		where = "a JSON string"
	}
	return st, Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
		"%s is not valid UTF-8 (byte %d of the body): send text as UTF-8 and bytes as base64", where, se.Offset)
}
