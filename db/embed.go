// Package db embeds the versioned SQL migrations, one folder per dialect.
package db

import "embed"

// Migrations holds sqlite/*.sql and postgres/*.sql (goose format).
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var Migrations embed.FS
