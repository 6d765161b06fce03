package shares_test

import (
	"testing"

	"github.com/convo-dev/convo/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
