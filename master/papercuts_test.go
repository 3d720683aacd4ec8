package master_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/lance-context/lance-context/master"
)

// Regression: an index task's result was the index package's struct,
// with Go's field names as keys (Column, Built, NewRows) while every
// other task result is snake_case.
func TestRegression_IndexTaskResultSnakeCase(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: master.Config{RefreshInterval: 200 * time.Millisecond, SchedulerInterval: time.Hour}})
	st := f.create(f.cat, "ix")
	appendFlush(t, st, recs("a", 5, "r1"))
	if _, err := st.Merge(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.run()
	task := call[map[string]any](f, "POST", "/api/v1/experiments/ix/index", "", 202)
	id := task["task"].(map[string]any)["id"].(string)
	var raw []byte
	eventually(t, 30*time.Second, "the index task to finish", func() bool {
		_, b := f.request("GET", "/api/v1/tasks/"+id, "")
		raw = b
		return bytes.Contains(b, []byte(`"state":"done"`)) || bytes.Contains(b, []byte(`"state":"failed"`))
	})
	var got struct {
		State  string `json:"state"`
		Result struct {
			Passes  int              `json:"passes"`
			Version uint64           `json:"version"`
			Indexes []map[string]any `json:"indexes"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "done" || len(got.Result.Indexes) == 0 {
		t.Fatalf("index task %s", raw)
	}
	for _, c := range got.Result.Indexes {
		for _, k := range []string{"column", "built", "index", "version", "new_rows", "replaced"} {
			if _, ok := c[k]; !ok {
				t.Fatalf("index result %v lacks %q: %s", c, k, raw)
			}
		}
		if _, ok := c["Column"]; ok {
			t.Fatalf("PascalCase keys in %s", raw)
		}
	}
}
