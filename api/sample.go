package api

// SampleRequest is the body of POST /api/v1/rollouts/{name}/sample: a
// batch of N complete groups of records (GRPO groups: every record of one
// key, problem_id by default, inside the policy-version window), read
// from the all view (base and pending generations, the newest write of an
// id winning).
type SampleRequest struct {
	// N is the number of groups wanted, 1 to 10,000. A call returns
	// min(N, groups still eligible); none (not an error) when they are
	// used up.
	N int `json:"n"`
	// GroupBy is the key column (default problem_id): any text column
	// but the long-text ones (content, strings of the model). Rows whose
	// key is null belong to no group.
	GroupBy string `json:"group_by,omitempty"`
	// PolicyVersions is the window; absent means every row, null
	// policy_version included. With a window, rows with a null
	// policy_version are outside it.
	PolicyVersions *PolicyWindow `json:"policy_versions,omitempty"`
	// DropZeroVariance leaves out groups whose rewards have zero variance:
	// fewer than two non-null rewards, or all equal.
	DropZeroVariance bool `json:"drop_zero_variance,omitempty"`
	// MaxTimesSampled is how often one key may be served to Group (default
	// 1: without replacement). It needs Group.
	MaxTimesSampled *int `json:"max_times_sampled,omitempty"`
	// Group is the consumer group: what it was served is counted durably
	// in the store. Without it nothing is counted or stored, and the same
	// key may come again in the next call.
	Group string `json:"group,omitempty"`
	// Seed makes the draw reproducible: the same seed over the same store
	// version (base version and pending generations) and the same
	// consumer-group counts gives the same batch. Absent: a random seed,
	// sent back in the answer.
	Seed *uint64 `json:"seed,omitempty"`
	// Weighting is how groups are drawn: "uniform" (default), "recency"
	// (a group's weight halves per policy version its newest record is
	// behind the newest version) or "reward_std" (weight = the standard
	// deviation of its rewards; zero-variance groups come only after all
	// others).
	Weighting string `json:"weighting,omitempty"`
}

// PolicyWindow restricts a sample to policy versions: the Last K newest by
// first appearance (the smallest created_at of the version's rows in the
// all view; ties by the larger version string), or exactly the versions In.
// Give one of the two.
type PolicyWindow struct {
	Last *int     `json:"last,omitempty"`
	In   []string `json:"in,omitempty"`
}

// SampleResponse answers a sample as JSON. Groups are in the order they
// were drawn; each group's records are ordered by rollout_id,
// sequence_order, id. Window lists the versions of the window (newest
// first for last, as given for in; empty without a window); Eligible
// counts the groups that could be drawn; Seed and Version (the base
// table's version) replay the draw.
type SampleResponse struct {
	Groups   []SampleGroup `json:"groups"`
	Count    int           `json:"count"`
	Rows     int           `json:"rows"`
	Eligible int           `json:"eligible"`
	Window   []string      `json:"window"`
	Seed     uint64        `json:"seed"`
	Version  uint64        `json:"version"`
}

// SampleGroup is one group: its key and every record of that key inside
// the window, with the mean and (population) standard deviation of their
// non-null rewards (null when none has a reward).
type SampleGroup struct {
	Key        string   `json:"key"`
	Records    []Record `json:"records"`
	RewardMean *float64 `json:"reward_mean"`
	RewardStd  *float64 `json:"reward_std"`
}

// Headers of a sample answered as an Arrow stream. The stream holds the
// rows of every group, each group's rows contiguous and the groups in the
// order they were drawn: a reader splits them into groups where the key
// column's value changes, or by the row counts the stream schema's
// metadata lists (SampleMetaGroupRows: comma separated, in that order;
// SampleMetaGroupBy names the key column). The headers carry the rest of
// SampleResponse.
const (
	HeaderSampleGroups   = "X-Sample-Groups"
	HeaderSampleSeed     = "X-Sample-Seed"
	HeaderSampleVersion  = "X-Sample-Version"
	HeaderSampleEligible = "X-Sample-Eligible"

	SampleMetaGroupRows = "lance-context.sample.group_rows"
	SampleMetaGroupBy   = "lance-context.sample.group_by"
)
