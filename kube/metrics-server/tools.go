//go:build tools

// Package tools pins the program this module builds.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
