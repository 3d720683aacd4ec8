package api

import "time"

// FeedResponse is the body of GET /api/v1/rollouts/{name}/feed: the rows
// after the position asked for (the group's committed one, or position=),
// and the position after them. Give Position back to read on, and commit
// it once the rows are processed. A read that waited and found nothing
// answers Count 0 and the position unchanged (or moved past rows the
// filters passed over).
type FeedResponse struct {
	Records  []Record `json:"records"`
	Position string   `json:"position"`
	Count    int      `json:"count"`
	Group    string   `json:"group,omitempty"`
}

// FeedCommitRequest is the body of POST .../feed/commit.
type FeedCommitRequest struct {
	Group    string `json:"group"`
	Position string `json:"position"`
}

// FeedGroup is a consumer group's committed position.
type FeedGroup struct {
	Group       string    `json:"group"`
	Position    string    `json:"position"`
	CommittedAt time.Time `json:"committed_at"`
}

// FeedGroupsResponse is the body of GET .../feed/groups.
type FeedGroupsResponse struct {
	Groups []FeedGroup `json:"groups"`
}

// FeedPositionHeader carries the position after an Arrow feed answer's
// rows (also in its schema metadata under FeedPositionKey).
const (
	FeedPositionHeader = "Lance-Context-Feed-Position"
	FeedPositionKey    = "lance_context.feed.position"
)
