package openai

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// A prompt that waits for function call outputs (or approvals) is one
// reply in convo but several responses in OpenAI's terms: the response
// that ends with the calls, then one response per continuation that
// answers them (OpenAI gives each continuation a new id). Segment 0 of a
// prompt is the response "resp_" and the prompt's id; segment n, the
// reply from its n-th wait on, is "resp_", the prompt's id, "_" and n.
// Each segment has its own sequence numbers from 0; a segment that ended
// stays as it ended.

// segmentID is the response id of the prompt's segment n.
func segmentID(prompt uuid.UUID, n int) string {
	if n == 0 {
		return responseID(prompt)
	}
	return responseID(prompt) + "_" + strconv.Itoa(n)
}

// parseResponseRef reads a response id: the prompt and the segment it
// names.
func parseResponseRef(s string) (uuid.UUID, int, bool) {
	rest, ok := strings.CutPrefix(s, responsePrefix)
	if !ok || len(rest) < 36 {
		return uuid.Nil, 0, false
	}
	id, ok := parseResponseID(s[:len(responsePrefix)+36])
	if !ok {
		return uuid.Nil, 0, false
	}
	if len(rest) == 36 {
		return id, 0, true
	}
	suffix, ok := strings.CutPrefix(rest[36:], "_")
	// One spelling per segment: no sign, no leading zero, no "_0".
	if !ok || suffix == "" || len(suffix) > 9 || suffix[0] < '1' || suffix[0] > '9' {
		return uuid.Nil, 0, false
	}
	n, err := strconv.Atoi(suffix)
	if err != nil {
		return uuid.Nil, 0, false
	}
	return id, n, true
}
