package dataplane_test

import (
	"io"

	"github.com/rs/zerolog"
)

func testLogger(w io.Writer) zerolog.Logger { return zerolog.New(w) }
