// Package jsonlimittest holds the hostile values of the tests of convo's
// rule for accepted JSON (package jsonlimit), shared by the tests of every
// door. Only tests import it.
package jsonlimittest

import "strings"

// HugeNumbers is a JSON list of the number 1e999999, which no 64-bit float
// holds (and which a schema library once turned into a big number of
// 10^999999, 72 ms each), n bytes long, or the longest such list under n:
// the attack's shape. n below 10 gives the one-number list.
func HugeNumbers(n int) string {
	const item = "1e999999,"
	k := max(0, (n-len("[1e999999]"))/len(item))
	return "[" + strings.Repeat(item, k) + "1e999999]"
}
