// Package netapplets is the network side of the images' userland: the
// clients (wget, ping, netstat, ip and brctl) and the servers (nginx, httpd
// and agnhost's netexec, serve-hostname and pause). Like every applet, they
// ask the kernel (kernel.Proc) for what a real kernel decides: a socket in
// the container's network namespace, a port below 1024, a raw socket, a
// link. Their rows are in the applets package's table.
package netapplets
