package limit

import (
	"strings"
	"testing"
	"time"

	"github.com/convo-dev/convo/conversation"
)

func requireExhausted(t *testing.T, err error, names string) {
	t.Helper()
	if conversation.ErrorCode(err) != conversation.ResourceExhausted {
		t.Fatalf("err = %v; want resource_exhausted", err)
	}
	if !strings.Contains(err.Error(), names) {
		t.Errorf("message %q does not name %q", err.Error(), names)
	}
}

func TestStreams(t *testing.T) {
	t.Parallel()

	t.Run("PerUserReachedOthersUnaffectedReleased", func(t *testing.T) {
		t.Parallel()
		s := NewStreams(2, 0)
		r1, err := s.Acquire("alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire("alice"); err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire("alice")
		requireExhausted(t, err, "max streams per user")
		if n, total := s.Open("alice"); n != 2 || total != 2 {
			t.Errorf("after a refusal: alice %d, total %d; want 2, 2", n, total)
		}
		if _, err := s.Acquire("bob"); err != nil {
			t.Errorf("bob refused because of alice: %v", err)
		}
		r1()
		r1() // a second release gives nothing back twice
		if n, total := s.Open("alice"); n != 1 || total != 2 {
			t.Errorf("after release: alice %d, total %d; want 1, 2", n, total)
		}
		if _, err := s.Acquire("alice"); err != nil {
			t.Errorf("after release: %v", err)
		}
	})

	t.Run("TotalReached", func(t *testing.T) {
		t.Parallel()
		s := NewStreams(0, 2)
		a, _ := s.Acquire("alice")
		if _, err := s.Acquire("bob"); err != nil {
			t.Fatal(err)
		}
		_, err := s.Acquire("carol")
		requireExhausted(t, err, "max streams per server")
		a()
		if _, err := s.Acquire("carol"); err != nil {
			t.Errorf("after release: %v", err)
		}
	})

	t.Run("NilLimitsNothing", func(t *testing.T) {
		t.Parallel()
		var s *Streams
		release, err := s.Acquire("alice")
		if err != nil {
			t.Fatal(err)
		}
		release()
	})
}

func TestWrites(t *testing.T) {
	t.Parallel()

	t.Run("BurstThenRefusedWithRetryAfterThenRefilled", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
		w := NewWrites(2, 3) // 2/s, burst 3
		w.now = func() time.Time { return now }
		for i := range 3 {
			if err := w.Allow("alice"); err != nil {
				t.Fatalf("write %d of the burst: %v", i, err)
			}
		}
		err := w.Allow("alice")
		requireExhausted(t, err, "write rate limit")
		if d := conversation.ErrorRetryAfter(err); d != 500*time.Millisecond {
			t.Errorf("retry after %v; want 500ms", d)
		}
		// A refusal takes no token: the next one is still due in 500ms.
		now = now.Add(499 * time.Millisecond)
		requireExhausted(t, w.Allow("alice"), "write rate limit")
		if err := w.Allow("bob"); err != nil {
			t.Errorf("bob refused because of alice: %v", err)
		}
		now = now.Add(time.Millisecond)
		if err := w.Allow("alice"); err != nil {
			t.Errorf("after the refill: %v", err)
		}
	})

	t.Run("FullBucketsAreDropped", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
		w := NewWrites(1, 1)
		w.now = func() time.Time { return now }
		for _, u := range []string{"a", "b", "c"} {
			if err := w.Allow(u); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(2 * sweepEvery)
		if err := w.Allow("d"); err != nil {
			t.Fatal(err)
		}
		if len(w.users) != 1 {
			t.Errorf("%d buckets kept; want only d's", len(w.users))
		}
	})

	t.Run("ZeroRateIsNoLimit", func(t *testing.T) {
		t.Parallel()
		w := NewWrites(0, 0)
		for range 1000 {
			if err := w.Allow("alice"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestSearches(t *testing.T) {
	t.Parallel()

	t.Run("RateThenRefusedWithRetryAfter", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
		s := NewSearches(1, 2, 0) // 1/s, burst 2
		s.rate.now = func() time.Time { return now }
		for range 2 {
			release, err := s.Acquire("alice")
			if err != nil {
				t.Fatal(err)
			}
			release()
		}
		_, err := s.Acquire("alice")
		requireExhausted(t, err, "search rate limit")
		if d := conversation.ErrorRetryAfter(err); d != time.Second {
			t.Errorf("retry after %v; want 1s", d)
		}
		if _, err := s.Acquire("bob"); err != nil {
			t.Errorf("bob refused because of alice: %v", err)
		}
		now = now.Add(time.Second)
		if _, err := s.Acquire("alice"); err != nil {
			t.Errorf("after the refill: %v", err)
		}
	})

	t.Run("RunningPerUserAndPerServer", func(t *testing.T) {
		t.Parallel()
		s := NewSearches(0, 0, 3) // no rate; 3 at once on the server
		var releases []func()
		for range MaxUserSearches {
			release, err := s.Acquire("alice")
			if err != nil {
				t.Fatal(err)
			}
			releases = append(releases, release)
		}
		_, err := s.Acquire("alice")
		requireExhausted(t, err, "max searches per user")
		if conversation.ErrorRetryAfter(err) <= 0 {
			t.Error("no retry after")
		}
		bob, err := s.Acquire("bob")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire("carol")
		requireExhausted(t, err, "max searches per server")
		// A place given back (twice: only once counts) is free again.
		bob()
		bob()
		if _, err := s.Acquire("carol"); err != nil {
			t.Errorf("after bob's search ended: %v", err)
		}
		_, err = s.Acquire("dave")
		requireExhausted(t, err, "max searches per server")
		releases[0]()
		if _, err := s.Acquire("alice"); err != nil {
			t.Errorf("after one of alice's searches ended: %v", err)
		}
	})

	t.Run("NoLimits", func(t *testing.T) {
		t.Parallel()
		s := NewSearches(0, 0, 0)
		if s != nil {
			t.Fatal("a limiter without limits")
		}
		for range 10 {
			if _, err := s.Acquire("alice"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 0: "1"} {
		if got := RetryAfterHeader(d); got != want {
			t.Errorf("RetryAfterHeader(%v) = %s; want %s", d, got, want)
		}
	}
}

func TestReads(t *testing.T) {
	t.Parallel()
	r := NewReads(2)
	first, err := r.Acquire("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Acquire("alice"); err != nil {
		t.Fatal(err)
	}
	_, err = r.Acquire("alice")
	requireExhausted(t, err, "max reads per user")
	if conversation.ErrorRetryAfter(err) <= 0 {
		t.Error("no retry after")
	}
	if _, err := r.Acquire("bob"); err != nil {
		t.Errorf("bob refused because of alice: %v", err)
	}
	first()
	first() // only once counts
	if _, err := r.Acquire("alice"); err != nil {
		t.Errorf("after one of alice's reads ended: %v", err)
	}
	_, err = r.Acquire("alice")
	requireExhausted(t, err, "max reads per user")

	var none *Reads = NewReads(0)
	if none != nil {
		t.Fatal("a cap of 0 limits")
	}
	for range 10 {
		if _, err := none.Acquire("alice"); err != nil {
			t.Fatal(err)
		}
	}
}
