package jsonlimittest

import (
	"encoding/json"
	"testing"
)

// TestHugeNumbers: the list is JSON of the size asked for, every item
// 1e999999.
func TestHugeNumbers(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 10, 19, 100_000, 1 << 20} {
		s := HugeNumbers(n)
		if n >= 10 && (len(s) > n || len(s) <= n-9) {
			t.Errorf("HugeNumbers(%d) is %d bytes", n, len(s))
		}
		var items []json.Number
		if err := json.Unmarshal([]byte(s), &items); err != nil || len(items) == 0 {
			t.Fatalf("HugeNumbers(%d): %v", n, err)
		}
		for _, it := range items {
			if it != "1e999999" {
				t.Fatalf("HugeNumbers(%d) holds %s", n, it)
			}
		}
	}
}
