// Package oci runs the containers whose image names a program (images.Program) as real
// processes under the real runc, the way containerd does: it writes an OCI bundle (config.json and
// a root file system) for the container and drives the runc binary through its command line
// (create, start, exec, kill, delete, state), as containerd's runc shim does through go-runc.
//
//   - spec_opts.go maps each field of a CRI container config to the OCI runtime spec in one place,
//     as option functions in the shape of containerd's internal/cri/opts (spec_linux_opts.go).
//   - bundle.go writes the bundle: config.json, the root with the program and the few files every
//     program root holds, the container's resolv.conf and hostname.
//   - runc.go is the runc driver; every call it makes is reported to Options.Observe, which
//     cri-fake's server records as an event of the OCI interface (cri-fake → runc).
//   - launcher.go is a cri-fake/runtime Launcher that hands program containers to runc and every
//     other container to the launcher it wraps (the process simulation), so a pod may mix both.
//   - task.go is a program container's task: exit status (OOMKilled from the memory cgroup), the
//     CRI log, exec, attach, stop, stats from the cgroup files.
//
// A container's main process and its exec processes are children of runc when they start; cri-fake
// makes itself a child subreaper (PR_SET_CHILD_SUBREAPER, as containerd's shim does), so once runc
// exits they are cri-fake's children and it waits for them itself (reaper_linux.go).
package oci
