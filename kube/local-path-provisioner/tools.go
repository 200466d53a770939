//go:build tools

// Package tools pins the program this module builds.
package tools

import _ "github.com/rancher/local-path-provisioner"
