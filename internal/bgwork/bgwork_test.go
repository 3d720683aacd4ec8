package bgwork

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitReturnsWhenWorkEnds(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var finished bool
	g.Go(func() { <-release; finished = true })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with work running: %v, want the context's deadline", err)
	}
	close(release)
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !finished {
		t.Fatal("Wait returned before the work ended")
	}
}
