package stream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// TestJoinStorm: 500 subscribers join at once, one on each of 500
// conversations whose replies are streaming, while the writes go on. Their
// snapshots are read in groups (postgres.SnapshotReader, two connections):
// far fewer snapshot reads than joiners. Each subscriber still gets its
// reply's text exactly (the snapshot's text so far, then every delta after
// its seq once, in order: no character twice, none missing) and every
// event after its snapshot's seq.
func TestJoinStorm(t *testing.T) {
	t.Parallel()
	tb := setup(t, hubOptions{snapshotConns: 2})
	ctx := context.Background()
	const joiners, rounds = 500, 6
	convs := make([]uuid.UUID, joiners)
	blocks := make([]uuid.UUID, joiners)
	for i := range joiners {
		convs[i], blocks[i] = tb.reply(t)
	}
	readsBefore := tb.snapshots.Reads()

	// Four writers, each appending to its share of the blocks in turn,
	// one delta per block a round; joiners come during the second round.
	const writers = 4
	var written sync.WaitGroup
	secondRound := make(chan struct{})
	var once sync.Once
	writeErrs := make(chan error, writers)
	for w := range writers {
		written.Go(func() {
			for round := range rounds {
				if round == 1 && w == 0 {
					once.Do(func() { close(secondRound) })
				}
				for i := w; i < joiners; i += writers {
					if err := tb.api.BlockAppend(ctx, apiq.BlockAppendParams{BlockID: blocks[i], Delta: fmt.Sprintf("<%d:%d>", i, round)}); err != nil {
						writeErrs <- err
						return
					}
				}
			}
		})
	}
	<-secondRound
	followers := make([]*follower, joiners)
	openErrs := make([]error, joiners)
	var opened sync.WaitGroup
	start := make(chan struct{})
	for i := range joiners {
		opened.Go(func() {
			<-start
			f, stop, err := tb.startFollower(convs[i], nil)
			followers[i], openErrs[i] = f, err
			if err == nil {
				t.Cleanup(stop)
			}
		})
	}
	close(start)
	opened.Wait()
	written.Wait()
	close(writeErrs)
	for err := range writeErrs {
		t.Fatal(err)
	}
	for i, err := range openErrs {
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
	}
	reads := tb.snapshots.Reads() - readsBefore
	for i, f := range followers {
		end := tb.lastSeq(t, convs[i])
		f.waitSeq(t, end, time.Minute)
		f.checkContiguous(t, f.start+1, end)
		var want strings.Builder
		for round := range rounds {
			fmt.Fprintf(&want, "<%d:%d>", i, round)
		}
		f.mu.Lock()
		text := f.text
		f.mu.Unlock()
		if text != want.String() {
			t.Fatalf("subscriber %d has text %q; want %q", i, text, want.String())
		}
	}
	// Far fewer reads than joiners: each group read holds the joiners
	// that came while the previous ones ran.
	if reads > joiners/5 {
		t.Errorf("%d snapshot reads for %d joiners; want far fewer", reads, joiners)
	}
	t.Logf("%d joiners, %d snapshot reads", joiners, reads)
}
