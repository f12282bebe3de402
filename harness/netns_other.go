//go:build !linux

package main

import "os"

// inOwnNetns: network namespaces are Linux only; elsewhere portmap is left out of the chain.
func inOwnNetns(inherit []*os.File, env []string) (bool, error) { return false, nil }
