// Package configs embeds the configuration files shipped with the binary.
package configs

import _ "embed"

// Catalog is the curated model catalog (catalog.json): the inference plane's fallback list
// when the model hub cannot be reached.
//
//go:embed catalog.json
var Catalog []byte
