//go:build tools

// Package tools names the etcd server so that `go mod tidy` keeps its dependencies.
package tools

import _ "go.etcd.io/etcd/server/v3"
