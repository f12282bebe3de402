//go:build !linux

package main

// inOwnNetns: network namespaces are Linux only; elsewhere portmap is left out of the chain.
func inOwnNetns() (bool, error) { return false, nil }
