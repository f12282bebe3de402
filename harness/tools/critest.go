//go:build tools

// Package tools records the test-only dependencies of critest (a Go test binary, built with
// `go test -c sigs.k8s.io/cri-tools/cmd/critest`), so that `go mod tidy` keeps them.
package tools

import (
	_ "sigs.k8s.io/cri-tools/cmd/critest"
)
