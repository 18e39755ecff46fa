package graph

// Limits applied by Validate (and documented in docs/ir.md).
const (
	// MaxIRBytes bounds the size of one IR document.
	MaxIRBytes = 4 << 20
	// MaxIRDepth bounds the JSON nesting depth of one IR document.
	MaxIRDepth = 128
	// MaxBodyNesting bounds how deep loop/map bodies may nest (a top-level graph is depth 0).
	MaxBodyNesting = 8
	// MaxTotalNodes bounds the number of nodes of a document, bodies included.
	MaxTotalNodes = 2000
)
