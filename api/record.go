package api

import (
	"encoding/json"
	"time"
)

// Relationship links a record to another one.
type Relationship struct {
	TargetID *string  `json:"target_id"`
	Relation *string  `json:"relation"`
	Weight   *float32 `json:"weight"`
}

// Record is one row of a rollout store: a step, a message or an artifact of
// a trajectory. Pointer and slice fields are nullable.
type Record struct {
	ID            string     `json:"id"`
	RolloutID     string     `json:"rollout_id"`
	ProblemID     string     `json:"problem_id"`
	Dataset       *string    `json:"dataset"`
	SequenceOrder int32      `json:"sequence_order"`
	Role          string     `json:"role"`
	CreatedAt     *time.Time `json:"created_at"`

	Content     *string `json:"content"`
	ContentType string  `json:"content_type"`

	ModelInputString  *string `json:"model_input_string"`
	ModelOutputString *string `json:"model_output_string"`
	Rationale         *string `json:"rationale"`
	ProblemText       *string `json:"problem_text"`
	UserMetadata      *string `json:"user_metadata"`

	InputTokens     []int32 `json:"input_tokens"`
	OutputTokens    []int32 `json:"output_tokens"`
	NumInputTokens  *int32  `json:"num_input_tokens"`
	NumOutputTokens *int32  `json:"num_output_tokens"`

	OutputLogprobs []float32 `json:"output_logprobs"`
	InputLogprobs  []float32 `json:"input_logprobs"`
	RefLogprobs    []float32 `json:"ref_logprobs"`
	LossMask       []int8    `json:"loss_mask"`

	Advantage *float32 `json:"advantage"`
	Reward    *float32 `json:"reward"`
	RawReward *float32 `json:"raw_reward"`
	Score     *float32 `json:"score"`
	GraderID  *string  `json:"grader_id"`

	IncludeInTraining *bool   `json:"include_in_training"`
	ExcludeReason     *string `json:"exclude_reason"`
	PolicyVersion     *string `json:"policy_version"`

	Relationships []Relationship `json:"relationships"`

	// BinaryPayload is base64 in JSON. It is accepted on append and never
	// returned by lists or gets; the blob route returns it.
	BinaryPayload   []byte  `json:"binary_payload,omitempty"`
	PayloadSize     *int64  `json:"payload_size"`
	PayloadChecksum *string `json:"payload_checksum"`
	ArtifactType    *string `json:"artifact_type"`
	// PayloadRef names the object that holds a payload stored out of line
	// (a large multipart part, streamed): set by the server only, never
	// read from or written to JSON; the blob route serves its bytes.
	PayloadRef *string `json:"-"`

	// Metadata is stored as JSON text. On input any JSON value is accepted:
	// a string is stored as given, anything else as its JSON encoding. On
	// output text that is JSON is sent as that JSON value (as the reference
	// does), other text as a JSON string.
	Metadata *string `json:"metadata"`
}

// recordFields is Record without its methods, so that decoding into it
// uses the default struct decoding.
type recordFields Record

// RecordJSON is a record as JSON with its metadata as any JSON value.
// Servers decode append bodies into it with a strict decoder
// (DisallowUnknownFields reaches it, since it has no UnmarshalJSON of its
// own) and convert with Record.
type RecordJSON struct {
	recordFields
	// Metadata is any JSON value (see Record.Metadata).
	Metadata json.RawMessage `json:"metadata"`
}

// Record returns the decoded record.
func (w *RecordJSON) Record() Record {
	r := Record(w.recordFields)
	r.Metadata = nil
	if len(w.Metadata) > 0 && string(w.Metadata) != "null" {
		var s string
		if json.Unmarshal(w.Metadata, &s) == nil {
			r.Metadata = &s
		} else {
			m := string(w.Metadata)
			r.Metadata = &m
		}
	}
	return r
}

// UnmarshalJSON accepts metadata as any JSON value and ignores fields it
// does not know, so that a client reads what a newer server sends. Servers
// decode append bodies strictly (see RecordJSON).
func (r *Record) UnmarshalJSON(b []byte) error {
	var w RecordJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = w.Record()
	return nil
}

// MarshalJSON sends metadata that is JSON text as that JSON value.
func (r Record) MarshalJSON() ([]byte, error) {
	w := RecordJSON{recordFields: recordFields(r)}
	w.recordFields.Metadata = nil
	if r.Metadata != nil {
		if json.Valid([]byte(*r.Metadata)) {
			w.Metadata = json.RawMessage(*r.Metadata)
		} else {
			q, err := json.Marshal(*r.Metadata)
			if err != nil {
				return nil, err
			}
			w.Metadata = q
		}
	}
	return json.Marshal(&w)
}
