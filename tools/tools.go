//go:build tools

// Package tools pins the code generators the project runs through make.
// It is a separate module so their dependencies stay out of the library's go.mod.
package tools

import (
	_ "github.com/sqlc-dev/sqlc/cmd/sqlc"
)
