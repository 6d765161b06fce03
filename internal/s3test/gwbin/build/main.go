// Command build builds versitygw into its cache directory unless it is
// there already, and prints its path (scripts/test.sh runs it in the
// background while the Go code compiles, so that the S3 tests find it
// built).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/convo-dev/convo/internal/s3test/gwbin"
)

func main() {
	bin, err := gwbin.Ensure(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
