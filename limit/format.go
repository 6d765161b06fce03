package limit

import (
	"strconv"
	"time"
)

// RetryAfterHeader renders a delay as the value of a Retry-After header:
// whole seconds, rounded up, at least 1.
func RetryAfterHeader(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'g', 4, 64) }

func itoa(n int) string { return strconv.Itoa(n) }
