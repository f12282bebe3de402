package process

import (
	_ "embed"
	"io/fs"

	"github.com/plugsim/plugsim/cri-fake/process/applets"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// BaseLayer returns the content of a base image: "busybox" (the default for any
// unknown name), "nginx", "httpd", "agnhost", "alpine", "debian", "pause", or
// "scratch" (empty). The image catalog picks the base per image; unknown images
// get busybox because that is what critest's test images are built on.
//
// "agnhost" is the e2e agnhost image (test/images/agnhost/Dockerfile of
// k8s.io/kubernetes): Alpine with /agnhost, the /agnhost-2 link, porter's
// /localhost.crt and /localhost.key, /uploads, and the Alpine packages the
// e2e specs exec (bind-tools' dig and nslookup, curl, netcat-openbsd's nc,
// musl-utils' getent, bash, util-linux-misc's ipcmk). "alpine" is Alpine's
// base (busybox and getent); "debian" stands in for debian:bookworm-slim with
// dnsutils (glibc-dns-testing): the Debian tools the specs run (sh, dig,
// nslookup, getent, seq) with busybox's coreutils in place of GNU's.
func BaseLayer(name string) *vfs.Layer {
	l := vfs.NewLayer()
	if name == "scratch" {
		return l
	}
	if name == "pause" {
		l.AddApplet("/pause", "pause")
		addEtc(l, busyboxOSRelease)
		return l
	}
	for _, d := range []string{"/bin", "/dev", "/etc", "/home", "/proc", "/root", "/sys", "/usr/bin", "/usr/sbin", "/var", "/var/log", "/run"} {
		l.AddDir(d, 0o755)
	}
	l.AddDir("/root", 0o700)
	l.AddDir("/tmp", 0o777|fs.ModeSticky)
	l.AddDir("/dev/shm", 0o777|fs.ModeSticky)
	l.AddSymlink("/var/run", "../run")
	l.AddDir("/var/spool/mail", 0o755)
	l.AddDir("/var/www", 0o755)
	l.AddApplet("/bin/busybox", "busybox")
	for _, a := range applets.Table().Busybox() {
		l.AddApplet("/bin/"+a, a)
	}
	osRelease := busyboxOSRelease
	switch name {
	case "agnhost", "alpine":
		osRelease = alpineOSRelease
		for _, d := range []string{"/lib", "/media", "/mnt", "/opt", "/sbin", "/srv", "/usr/lib", "/usr/local/bin", "/usr/share", "/var/cache", "/var/empty", "/var/lib", "/var/local", "/var/lock", "/var/opt"} {
			l.AddDir(d, 0o755)
		}
		l.AddDir("/var/tmp", 0o777|fs.ModeSticky)
		l.AddApplet("/usr/bin/getent", "getent")
		if name == "agnhost" {
			addAgnhost(l)
		}
	case "debian":
		osRelease = debianOSRelease
		for _, d := range []string{"/usr/lib", "/usr/local/bin", "/usr/share", "/var/cache", "/var/lib", "/sbin"} {
			l.AddDir(d, 0o755)
		}
		l.AddDir("/var/tmp", 0o777|fs.ModeSticky)
		l.AddApplet("/usr/bin/getent", "getent")
		l.AddApplet("/bin/bash", "bash")
		for file, a := range dnsTools {
			l.AddApplet("/usr/bin/"+file, a)
		}
	}
	addEtc(l, osRelease)
	switch name {
	case "nginx":
		l.AddApplet("/usr/sbin/nginx", "nginx")
		l.AddFile("/docker-entrypoint.sh", []byte(dockerEntrypoint), 0o755)
		l.AddDir("/etc/nginx/conf.d", 0o755)
		l.AddFile("/etc/nginx/nginx.conf", []byte("user nginx;\nworker_processes 1;\npid /var/run/nginx.pid;\nevents { worker_connections 1024; }\nhttp { include /etc/nginx/conf.d/*.conf; }\n"), 0o644)
		l.AddFile("/etc/nginx/conf.d/default.conf", []byte("server {\n    listen 80;\n    root /usr/share/nginx/html;\n}\n"), 0o644)
		l.AddFile("/usr/share/nginx/html/index.html", []byte(nginxIndex), 0o644)
		l.AddFile("/usr/share/nginx/html/50x.html", []byte("<html><body><h1>An error occurred.</h1></body></html>\n"), 0o644)
		l.AddDir("/var/cache/nginx", 0o755)
		l.AddDir("/var/log/nginx", 0o755)
	case "httpd":
		l.AddApplet("/usr/local/apache2/bin/httpd", "httpd")
		l.AddApplet("/usr/local/bin/httpd-foreground", "httpd")
		l.AddFile("/usr/local/apache2/htdocs/index.html", []byte("<html><body><h1>It works!</h1></body></html>\n"), 0o644)
		l.AddFile("/usr/local/apache2/conf/httpd.conf", []byte("Listen 80\nDocumentRoot \"/usr/local/apache2/htdocs\"\n"), 0o644)
		l.AddDir("/usr/local/apache2/logs", 0o755)
	}
	return l
}

// dnsTools are the DNS clients of bind-tools (Alpine) and dnsutils (Debian), by file name in
// /usr/bin: BIND's nslookup, ahead of busybox's /bin/nslookup in PATH.
var dnsTools = map[string]string{"dig": "dig", "nslookup": "bind-nslookup"}

// agnhostLocalhostCert and agnhostLocalhostKey are the image's /localhost.crt and /localhost.key,
// which porter serves TLS with and netexec offers: a self-signed test certificate for 127.0.0.1,
// ::1 and localhost, made for plugsim with openssl (upstream's image carries its own pair of the
// same kind, test/images/agnhost/porter/). The key is public on purpose: it is test data.
//
//go:embed imagefiles/localhost.crt
var agnhostLocalhostCert []byte

//go:embed imagefiles/localhost.key
var agnhostLocalhostKey []byte

// addAgnhost adds what test/images/agnhost/Dockerfile puts on Alpine: the program, its
// agnhost-2 link (entrypoint-tester specs override the entrypoint with it), porter's
// certificate, netexec's /uploads, and the packages it installs.
func addAgnhost(l *vfs.Layer) {
	l.AddApplet("/agnhost", "agnhost")
	l.AddSymlink("/agnhost-2", "agnhost")
	l.AddFile("/localhost.crt", agnhostLocalhostCert, 0o644)
	l.AddFile("/localhost.key", agnhostLocalhostKey, 0o644)
	l.AddDir("/uploads", 0o755)
	l.AddApplet("/bin/bash", "bash")
	l.AddApplet("/usr/bin/ipcmk", "ipcmk")
	for _, a := range []string{"curl", "nc"} { // the Alpine packages' programs (besides busybox's) its specs run
		l.AddApplet("/usr/bin/"+a, a)
	}
	for file, a := range dnsTools {
		l.AddApplet("/usr/bin/"+file, a)
	}
}

// dockerEntrypoint is the official nginx image's entrypoint, reduced to what
// it does with no /docker-entrypoint.d scripts: exec its arguments.
const dockerEntrypoint = `#!/bin/sh
set -e
exec "$@"
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. Further configuration is required.</p>
</body>
</html>
`

const (
	busyboxOSRelease = "NAME=\"plugsim simulated busybox\"\nID=busybox\n"
	// Alpine's and Debian's own /etc/os-release (the image volume spec reads "Alpine Linux" from
	// kitten's).
	alpineOSRelease = "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.21.3\nPRETTY_NAME=\"Alpine Linux v3.21\"\nHOME_URL=\"https://alpinelinux.org/\"\nBUG_REPORT_URL=\"https://gitlab.alpinelinux.org/alpine/aports/-/issues\"\n"
	debianOSRelease = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\nHOME_URL=\"https://www.debian.org/\"\n"
)

func addEtc(l *vfs.Layer, osRelease string) {
	l.AddDir("/etc", 0o755)
	// /etc/passwd and /etc/group are generated by NewFS from the image's users;
	// these are the entries every busybox image has.
	l.AddFile("/etc/shells", []byte("/bin/sh\n/bin/ash\n"), 0o644)
	l.AddFile("/etc/os-release", []byte(osRelease), 0o644)
}
