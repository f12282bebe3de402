package process

import "sync"

// appletTable is the one table of applets: every name a simulated executable
// may run, what runs it, whether the shell runs it inline and whether the
// busybox base image links it into /bin. Every list of applet names (Applets,
// the busybox image's /bin, what `busybox` prints, the shell's inline set, the
// image behaviour's executables) is derived from it; adding an applet is one
// row here and its function.
var appletTable = sync.OnceValue(func() *appletSet {
	return newAppletSet([]appletRow{
		{name: "sh", run: appletSh, busybox: true},
		{name: "ash", run: appletSh, busybox: true},
		{name: "echo", run: appletEcho, inline: true, busybox: true},
		{name: "printf", run: appletPrintf, inline: true, busybox: true},
		{name: "cat", run: appletCat, busybox: true},
		{name: "sleep", run: appletSleep, busybox: true},
		{name: "ls", run: appletLs, busybox: true},
		{name: "mkdir", run: appletMkdir, busybox: true},
		{name: "touch", run: appletTouch, busybox: true},
		{name: "rm", run: appletRm, busybox: true},
		{name: "cp", run: appletCp, busybox: true},
		{name: "mv", run: appletMv, busybox: true},
		{name: "hostname", run: appletHostname, busybox: true},
		{name: "id", run: appletID, busybox: true},
		{name: "whoami", run: appletWhoami, busybox: true},
		{name: "env", run: appletEnv, busybox: true},
		{name: "printenv", run: appletPrintenv, busybox: true},
		{name: "pwd", run: appletPwd, busybox: true},
		{name: "test", run: appletTest, inline: true, busybox: true},
		{name: "[", run: appletTest, inline: true, busybox: true},
		{name: "[[", run: appletTest, inline: true, busybox: true},
		{name: "true", run: appletTrue, inline: true, busybox: true},
		{name: "false", run: appletFalse, inline: true, busybox: true},
		{name: "grep", run: appletGrep, busybox: true},
		{name: "egrep", run: appletGrep, busybox: true},
		{name: "fgrep", run: appletGrep, busybox: true},
		{name: "wc", run: appletWc, busybox: true},
		{name: "head", run: appletHead, busybox: true},
		{name: "tail", run: appletTail, busybox: true},
		{name: "date", run: appletDate, busybox: true},
		{name: "pgrep", run: appletPgrep, busybox: true},
		{name: "pidof", run: appletPidof, busybox: true},
		{name: "kill", run: appletKill, inline: true, busybox: true},
		{name: "sysctl", run: appletSysctl, busybox: true},
		{name: "nproc", run: appletNproc, busybox: true},
		{name: "top", run: appletTop, busybox: true},
		{name: "seq", run: appletSeq, busybox: true},
		{name: "sync", run: appletTrue, busybox: true},
		{name: "uname", run: appletUname, busybox: true},
		{name: "basename", run: appletBasename, busybox: true},
		{name: "dirname", run: appletDirname, busybox: true},
		{name: "which", run: appletWhich, busybox: true},
		{name: "ps", run: appletPs, busybox: true},
		{name: "tee", run: appletTee, busybox: true},
		{name: "ln", run: appletLn, busybox: true},
		{name: "rmdir", run: appletRmdir, busybox: true},
		{name: "stat", run: appletStat, busybox: true},
		{name: "sort", run: appletSort, busybox: true},
		{name: "tr", run: appletTr, busybox: true},
		{name: "cut", run: appletCut, busybox: true},
		{name: "yes", run: appletYes, busybox: true},
		{name: "chmod", run: appletChmod, busybox: true},
		{name: "readlink", run: appletReadlink, busybox: true},
		{name: "realpath", run: appletRealpath, busybox: true},
		{name: "md5sum", run: appletMd5sum, busybox: true},
		{name: "netstat", run: appletNetstat, busybox: true},
		{name: "mount", run: appletMount, busybox: true},
		{name: "wget", run: appletWget, busybox: true},
		{name: "bash", run: appletSh},
		{name: "busybox", run: appletBusybox},
		{name: "pause", run: appletPause},
		{name: "program", run: appletProgram},
		{name: "nginx", run: appletNginx},
		{name: "httpd", run: appletHttpd},
		{name: "httpd-foreground", run: appletHttpd},
		{name: "agnhost", run: appletAgnhost},
	})
})

// appletRow is one applet of the table.
type appletRow struct {
	name string
	run  applet
	// inline applets run inside the shell without a new process, as busybox
	// ash runs its builtins (so `pgrep echo` never sees them).
	inline bool
	// busybox applets are linked into /bin of the busybox base image and
	// listed by the busybox applet, in the table's order.
	busybox bool
}

// appletSet is the table indexed by name. A container keeps the one it was
// started with, so the applets reach it through their process, not through
// a package variable (which would make an initialisation cycle sh -> table -> sh).
type appletSet struct {
	rows   []appletRow
	byName map[string]*appletRow
}

func newAppletSet(rows []appletRow) *appletSet {
	s := &appletSet{rows: rows, byName: make(map[string]*appletRow, len(rows))}
	for i := range rows {
		s.byName[rows[i].name] = &rows[i]
	}
	return s
}

// lookup is the applet called name.
func (s *appletSet) lookup(name string) (applet, bool) {
	if r := s.byName[name]; r != nil {
		return r.run, true
	}
	return nil, false
}

// inline is the applet called name when the shell runs it without a process.
func (s *appletSet) inline(name string) (applet, bool) {
	if r := s.byName[name]; r != nil && r.inline {
		return r.run, true
	}
	return nil, false
}

// names lists every applet name, in the table's order.
func (s *appletSet) names() []string {
	out := make([]string, len(s.rows))
	for i, r := range s.rows {
		out[i] = r.name
	}
	return out
}

// busybox lists the applets of the busybox image's /bin, in the table's order.
func (s *appletSet) busybox() []string {
	var out []string
	for _, r := range s.rows {
		if r.busybox {
			out = append(out, r.name)
		}
	}
	return out
}
