//go:build tools

// Package tools names runc so that `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/opencontainers/runc"
