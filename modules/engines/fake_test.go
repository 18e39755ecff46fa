package engines_test

import (
	"testing"

	"github.com/svc-dev/svc/modules/engines/enginetest"
)

// The test binary doubles as the stand-in llama-server (see enginetest).
func TestMain(m *testing.M) { enginetest.Main(m) }
