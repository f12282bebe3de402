// Package applets is the userland of the busybox-like images: every program
// a simulated executable can run, by kind (applets_text.go
// for echo, printf, grep, sort, tee, basename…; applets_files.go for cat, ls,
// cp, mv, rm…; applets_sys.go for sleep, id, ps, kill, hostname…;
// applet_dd.go, applet_ipc.go, applet_chown.go, applet_mount.go; the network
// programs are in netapplets and what all of them share in libbb), and the
// one table of them (applettable.go) from which every list of applet names is
// derived.
//
// It stops at the kernel: an applet asks for what a real kernel decides
// (writing a file, binding a port, sending a signal, setting the host name)
// through kernel.Proc; reads of the file system go to its vfs.FS.
package applets
