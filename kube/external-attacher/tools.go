//go:build tools

// Package tools pins the program this module builds.
package tools

import _ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
