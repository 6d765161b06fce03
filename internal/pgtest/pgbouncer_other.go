//go:build !unix

package pgtest

import "testing"

// PgBouncer fails the test: the tests that run convo through PgBouncer run
// on Unix systems only.
func PgBouncer(t testing.TB, dsns ...string) []string {
	t.Helper()
	t.Fatal("pgtest: PgBouncer runs on Unix systems only")
	return nil
}
