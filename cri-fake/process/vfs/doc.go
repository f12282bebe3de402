// Package vfs is a container's file system view: an in-memory copy-on-write
// layer over shared image content (Layer), synthetic /etc files, a virtual
// /dev and /proc (the process table answers /proc/<pid> through SetProc), and
// mounts onto real host paths, every path resolved component by component as
// the kernel resolves it in the container's mount namespace and every host
// operation confined to the mount's directory through an os.Root. The
// container's own files are bounded by its memory limit (ENOSPC past it).
//
// Operations that a kernel would permission-check take the caller's Cred
// (the *As methods); the plain ones act as root. It stops at files: what
// runs an executable (Executable names the applet or script) and who the
// caller is are decided by package process.
package vfs
