//go:build tools

// Package tools pins the program this module builds.
package tools

import _ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
