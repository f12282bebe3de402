//go:build !linux

package main

// closeInheritedOnExec: only Linux lists a process's descriptors in /proc/self/fd; elsewhere the
// harness leaves them as they are.
func closeInheritedOnExec() {}
