package applets

import (
	"sync"

	"github.com/plugsim/plugsim/cri-fake/process/agnhost"
	"github.com/plugsim/plugsim/cri-fake/process/awk"
	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/netapplets"
	"github.com/plugsim/plugsim/cri-fake/process/shell"
)

// appletTable is the one table of applets: every name a simulated executable
// may run, what runs it, whether the shell runs it inline and whether the
// busybox base image links it into /bin. Every list of applet names (Applets,
// the busybox image's /bin, what `busybox` prints, the shell's inline set, the
// image behaviour's executables) is derived from it; adding an applet is one
// row here and its function.
var table = sync.OnceValue(func() *kernel.AppletSet { return kernel.NewAppletSet(Rows()) })

// appletRows is the table's rows.
func Rows() []kernel.Applet {
	return []kernel.Applet{
		{Name: "sh", Run: shell.Sh, Busybox: true},
		{Name: "ash", Run: shell.Sh, Busybox: true},
		{Name: "echo", Run: appletEcho, Inline: true, Busybox: true},
		{Name: "printf", Run: appletPrintf, Inline: true, Busybox: true},
		{Name: "cat", Run: appletCat, Busybox: true},
		{Name: "sleep", Run: appletSleep, Busybox: true},
		{Name: "ls", Run: appletLs, Busybox: true},
		{Name: "mkdir", Run: appletMkdir, Busybox: true},
		{Name: "touch", Run: appletTouch, Busybox: true},
		{Name: "rm", Run: appletRm, Busybox: true},
		{Name: "cp", Run: appletCp, Busybox: true},
		{Name: "mv", Run: appletMv, Busybox: true},
		{Name: "hostname", Run: appletHostname, Busybox: true},
		{Name: "id", Run: appletID, Busybox: true},
		{Name: "whoami", Run: appletWhoami, Busybox: true},
		{Name: "env", Run: appletEnv, Busybox: true},
		{Name: "printenv", Run: appletPrintenv, Busybox: true},
		{Name: "pwd", Run: appletPwd, Busybox: true},
		{Name: "test", Run: appletTest, Inline: true, Busybox: true},
		{Name: "[", Run: appletTest, Inline: true, Busybox: true},
		{Name: "[[", Run: appletTest, Inline: true, Busybox: true},
		{Name: "true", Run: appletTrue, Inline: true, Busybox: true},
		{Name: "false", Run: appletFalse, Inline: true, Busybox: true},
		{Name: "grep", Run: appletGrep, Busybox: true},
		{Name: "egrep", Run: appletGrep, Busybox: true},
		{Name: "fgrep", Run: appletGrep, Busybox: true},
		{Name: "wc", Run: appletWc, Busybox: true},
		{Name: "head", Run: appletHead, Busybox: true},
		{Name: "tail", Run: appletTail, Busybox: true},
		{Name: "date", Run: appletDate, Busybox: true},
		{Name: "pgrep", Run: appletPgrep, Busybox: true},
		{Name: "pidof", Run: appletPidof, Busybox: true},
		{Name: "kill", Run: appletKill, Inline: true, Busybox: true},
		{Name: "sysctl", Run: appletSysctl, Busybox: true},
		{Name: "nproc", Run: appletNproc, Busybox: true},
		{Name: "top", Run: appletTop, Busybox: true},
		{Name: "seq", Run: appletSeq, Busybox: true},
		{Name: "sync", Run: appletTrue, Busybox: true},
		{Name: "uname", Run: appletUname, Busybox: true},
		{Name: "basename", Run: appletBasename, Busybox: true},
		{Name: "dirname", Run: appletDirname, Busybox: true},
		{Name: "which", Run: appletWhich, Busybox: true},
		{Name: "ps", Run: appletPs, Busybox: true},
		{Name: "tee", Run: appletTee, Busybox: true},
		{Name: "ln", Run: appletLn, Busybox: true},
		{Name: "rmdir", Run: appletRmdir, Busybox: true},
		{Name: "stat", Run: appletStat, Busybox: true},
		{Name: "sort", Run: appletSort, Busybox: true},
		{Name: "tr", Run: appletTr, Busybox: true},
		{Name: "cut", Run: appletCut, Busybox: true},
		{Name: "awk", Run: awk.Main, Busybox: true},
		{Name: "yes", Run: appletYes, Busybox: true},
		{Name: "chmod", Run: appletChmod, Busybox: true},
		{Name: "readlink", Run: appletReadlink, Busybox: true},
		{Name: "realpath", Run: appletRealpath, Busybox: true},
		{Name: "md5sum", Run: appletMd5sum, Busybox: true},
		{Name: "netstat", Run: netapplets.Netstat, Busybox: true},
		{Name: "mount", Run: appletMount, Busybox: true},
		{Name: "umount", Run: appletUmount, Busybox: true},
		{Name: "wget", Run: netapplets.Wget, Busybox: true},
		{Name: "nslookup", Run: netapplets.BusyboxNslookup, Busybox: true},
		{Name: "chown", Run: appletChown, Busybox: true},
		{Name: "chgrp", Run: appletChown, Busybox: true},
		{Name: "mknod", Run: appletMknod, Busybox: true},
		{Name: "ping", Run: netapplets.Ping, Busybox: true},
		{Name: "ip", Run: netapplets.IP, Busybox: true},
		{Name: "brctl", Run: netapplets.Brctl, Busybox: true},
		{Name: "nnp", Run: appletNnp},
		{Name: "dd", Run: appletDd, Busybox: true},
		{Name: "expr", Run: appletExpr, Busybox: true},
		{Name: "hexdump", Run: appletHexdump, Busybox: true},
		{Name: "ipcs", Run: appletIpcs, Busybox: true},
		{Name: "ipcmk", Run: appletIpcmk}, // util-linux's: not in busybox
		// The network clients of the agnhost and glibc-dns-testing images (curl, netcat-openbsd,
		// BIND's dig and nslookup, libc's getent), not busybox's.
		{Name: "curl", Run: netapplets.Curl},
		{Name: "nc", Run: netapplets.Nc},
		{Name: "dig", Run: netapplets.Dig},
		{Name: "bind-nslookup", Run: netapplets.Nslookup}, // linked as /usr/bin/nslookup (images.go)
		{Name: "getent", Run: netapplets.Getent},
		{Name: "bash", Run: shell.Sh},
		{Name: "busybox", Run: appletBusybox},
		{Name: "pause", Run: libbb.Pause},
		{Name: "program", Run: appletProgram},
		{Name: "nginx", Run: netapplets.Nginx},
		{Name: "httpd", Run: netapplets.Httpd},
		{Name: "httpd-foreground", Run: netapplets.Httpd},
		{Name: "agnhost", Run: agnhost.Main},
	}
}

// Table is the applet table indexed by name, built once.
func Table() *kernel.AppletSet { return table() }
