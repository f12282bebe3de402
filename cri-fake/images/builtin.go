package images

// Builtin returns the built-in catalog: the sandbox (pause) images, the everyday images
// (busybox, nginx), Kubernetes' e2e test images, and every image critest v1.37.0 pulls, with the
// users its image specs expect (cri-tools pkg/validate/consts.go).
func Builtin() []CatalogImage {
	const (
		e2e     = "registry.k8s.io/e2e-test-images/"
		critest = "gcr.io/k8s-staging-cri-tools/"
		path    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	)
	sh := []string{"sh"}
	nginxCmd := []string{"nginx", "-g", "daemon off;"}
	return append(programImages(), []CatalogImage{
		// The sandbox image. pause:3.9 is published under both registries; it is one image, so
		// both names pull the same ID (critest "removing image from one registry ...").
		{Repositories: []string{"registry.k8s.io/pause", "k8s.gcr.io/pause"}, Tags: []string{"3.9"},
			Size: 321520, User: "65535:65535", Entrypoint: []string{"/pause"}, Env: []string{path}},
		{Repositories: []string{"registry.k8s.io/pause"}, Tags: []string{"3.10"},
			Size: 320368, User: "65535:65535", Entrypoint: []string{"/pause"}, Env: []string{path}},
		{Repositories: []string{"registry.k8s.io/pause"}, Tags: []string{"3.10.1"},
			Size: 320448, User: "65535:65535", Entrypoint: []string{"/pause"}, Env: []string{path}},
		// The e2e suite's pause (test/utils/image/manifest.go Pause), which its specs also run as a
		// container image: /pause blocks until a signal ends it.
		{Repositories: []string{"registry.k8s.io/pause"}, Tags: []string{"3.10.2"},
			Size: 320502, User: "65535:65535", Entrypoint: []string{"/pause"}, Env: []string{path}},

		{Repositories: []string{"docker.io/library/busybox"}, Tags: []string{"latest", "1.37", "1.37.0"},
			Size: 4277910, Cmd: sh, Env: []string{path}},
		{Repositories: []string{"docker.io/library/busybox"}, Tags: []string{"1.36", "1.36.1"},
			Size: 4261550, Cmd: sh, Env: []string{path}},
		{Repositories: []string{"docker.io/library/nginx"}, Tags: []string{"latest", "1.29", "mainline"},
			Size: 72319182, Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: nginxCmd,
			Env: []string{path, "NGINX_VERSION=1.29.1"}, StopSignal: "SIGQUIT", PullLatency: "60ms"},
		{Repositories: []string{"docker.io/library/nginx"}, Tags: []string{"1.27", "stable"},
			Size: 72188133, Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: nginxCmd,
			Env: []string{path, "NGINX_VERSION=1.27.5"}, StopSignal: "SIGQUIT", PullLatency: "60ms"},
		{Repositories: []string{"docker.io/library/alpine"}, Tags: []string{"latest", "3.22"},
			Size: 8309108, Cmd: []string{"/bin/sh"}, Env: []string{path}},

		// Kubernetes e2e test images (registry.k8s.io/e2e-test-images).
		{Repositories: []string{e2e + "busybox"}, Tags: []string{"1.29-2"}, Size: 732685, Cmd: sh, Env: []string{path}},
		{Repositories: []string{e2e + "busybox"}, Tags: []string{"1.29-4"}, Size: 732795, Cmd: sh, Env: []string{path}},
		{Repositories: []string{e2e + "busybox"}, Tags: []string{"1.36.1-1"}, Size: 2207612, Cmd: sh, Env: []string{path}},
		{Repositories: []string{e2e + "nginx"}, Tags: []string{"1.14-2"}, Size: 6978806, Cmd: nginxCmd,
			Env: []string{path}, StopSignal: "SIGQUIT"},
		{Repositories: []string{e2e + "nginx"}, Tags: []string{"1.15-4"}, Size: 7000082, Cmd: nginxCmd,
			Env: []string{path}, StopSignal: "SIGQUIT"},
		{Repositories: []string{e2e + "httpd"}, Tags: []string{"2.4.38-4"}, Size: 40764680,
			Cmd: []string{"httpd-foreground"}, Env: []string{path, "HTTPD_PREFIX=/usr/local/apache2"}, StopSignal: "SIGWINCH"},
		{Repositories: []string{e2e + "httpd"}, Tags: []string{"2.4.39-4"}, Size: 41901429,
			Cmd: []string{"httpd-foreground"}, Env: []string{path, "HTTPD_PREFIX=/usr/local/apache2"}, StopSignal: "SIGWINCH"},
		// nonewprivs (test/images/nonewprivs): alpine with /usr/local/bin/nnp, set-user-ID root,
		// which prints its effective uid; critest's NoNewPrivs specs run it as uid 1000.
		{Repositories: []string{e2e + "nonewprivs"}, Tags: []string{"1.3"}, Size: 3528704, Cmd: []string{"nnp"},
			Env: []string{path}, Behavior: nonewprivs},
		// nonewprivs 1.4 (the e2e suite's Nonewprivs): the same program on alpine:3.22.
		{Repositories: []string{e2e + "nonewprivs"}, Tags: []string{"1.4"}, Size: 4042342, Cmd: []string{"nnp"},
			Env: []string{path}, Behavior: nonewprivsAlpine},

		// agnhost (test/images/agnhost/Dockerfile): ENTRYPOINT ["/agnhost"], CMD ["pause"], on
		// Alpine, with the user and group the SupplementalGroups spec reads from the image. 2.66.1
		// is the e2e suite's Agnhost, 2.55 its AgnhostPrev (the "old image" of the workload
		// update specs).
		{Repositories: []string{e2e + "agnhost"}, Tags: []string{"2.53"}, Size: 51103872,
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{path}, Behavior: agnhost},
		{Repositories: []string{e2e + "agnhost"}, Tags: []string{"2.55"}, Size: 51623424,
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{path}, Behavior: agnhost},
		{Repositories: []string{e2e + "agnhost"}, Tags: []string{"2.56"}, Size: 52016238,
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{path}, Behavior: agnhost},
		{Repositories: []string{e2e + "agnhost"}, Tags: []string{"2.66.1"}, Size: 54124544,
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{path}, Behavior: agnhost},
		// kitten and nautilus (test/images/{kitten,nautilus}/Dockerfile): agnhost with a picture
		// and its /data.json, serving / with test-webserver. The update-demo spec reads nautilus'
		// data.json through the API server's pod proxy; the image-volume spec mounts kitten and
		// reads its data.json and /etc/os-release ("Alpine Linux").
		{Repositories: []string{e2e + "kitten"}, Tags: []string{"1.8"}, Size: 54139313,
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{path}, Behavior: kitten},
		{Repositories: []string{e2e + "nautilus"}, Tags: []string{"1.8"}, Size: 54145775,
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{path}, Behavior: nautilus},
		// busybox 1.37.0-2 (test/images/busybox: busybox:1.37.0), the e2e suite's BusyBox.
		{Repositories: []string{e2e + "busybox"}, Tags: []string{"1.37.0-2"}, Size: 4277910, Cmd: sh, Env: []string{path}},
		// nginx 1.27.0-2 (test/images/nginx: nginx:1.27-alpine), the e2e suite's Nginx.
		{Repositories: []string{e2e + "nginx"}, Tags: []string{"1.27.0-2"}, Size: 47474523,
			Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: nginxCmd,
			Env: []string{path, "NGINX_VERSION=1.27.0"}, StopSignal: "SIGQUIT"},
		// glibc-dns-testing 2.1.1 (test/images/glibc-dns-testing: debian:bookworm-slim with
		// dnsutils), whose dig and getent use glibc's resolver where agnhost's use musl's.
		{Repositories: []string{e2e + "glibc-dns-testing"}, Tags: []string{"2.1.1"}, Size: 126467371,
			Cmd: []string{"bash"}, Env: []string{path}, Behavior: []byte(`{"base":"debian"}`)},

		// critest's image specs (pkg/validate/consts.go): distinct images, except where a spec
		// needs one image under several tags.
		{Repositories: []string{critest + "test-image-latest"}, Tags: []string{"latest"}, Size: 1331200, Cmd: sh},
		{Repositories: []string{critest + "test-image-tag"}, Tags: []string{"test"}, Size: 1331210, Cmd: sh},
		{Repositories: []string{critest + "test-image-tag"}, Tags: []string{"all"}, Size: 1331220, Cmd: sh},
		{Repositories: []string{critest + "test-image-digest"},
			Digest: "sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf", Size: 1331230, Cmd: sh},
		{Repositories: []string{critest + "test-image-1"}, Tags: []string{"latest"}, Size: 1331241, Cmd: sh},
		{Repositories: []string{critest + "test-image-2"}, Tags: []string{"latest"}, Size: 1331242, Cmd: sh},
		{Repositories: []string{critest + "test-image-3"}, Tags: []string{"latest"}, Size: 1331243, Cmd: sh},
		{Repositories: []string{critest + "test-image-tags"}, Tags: []string{"1", "2", "3"}, Size: 1331250, Cmd: sh},
		{Repositories: []string{critest + "test-image-user-uid"}, Tags: []string{"latest"}, Size: 1331260, User: "1002", Cmd: sh},
		{Repositories: []string{critest + "test-image-user-username"}, Tags: []string{"latest"}, Size: 1331261, User: "www-data", Cmd: sh},
		{Repositories: []string{critest + "test-image-user-uid-group"}, Tags: []string{"latest"}, Size: 1331262, User: "1003:1003", Cmd: sh},
		{Repositories: []string{critest + "test-image-user-username-group"}, Tags: []string{"latest"}, Size: 1331263, User: "www-data:www-data", Cmd: sh},
		{Repositories: []string{critest + "test-image-predefined-group"}, Tags: []string{"latest"}, Size: 1331264, User: "1000", Cmd: sh},
		// The hostnet-nginx images are nginx configured to listen on 12003 (so that they do not
		// collide with a web server on the node's port 80 when run in the host network).
		{Repositories: []string{critest + "hostnet-nginx-amd64"}, Tags: []string{"latest"}, Size: 7000100, Cmd: nginxCmd, StopSignal: "SIGQUIT", Behavior: hostnetNginx},
		{Repositories: []string{critest + "hostnet-nginx-arm64"}, Tags: []string{"latest"}, Size: 7000101, Cmd: nginxCmd, StopSignal: "SIGQUIT", Behavior: hostnetNginx},
	}...)
}

// nonewprivs is the content difference of the e2e nonewprivs image: its program, set-user-ID
// root (cri-fake/process README "Image behaviour").
var nonewprivs = []byte(`{"base":"busybox","executables":{"/usr/local/bin/nnp":"nnp"},"setuid":["/usr/local/bin/nnp"]}`)

// nonewprivsAlpine is nonewprivs 1.4, on Alpine.
var nonewprivsAlpine = []byte(`{"base":"alpine","executables":{"/usr/local/bin/nnp":"nnp"},"setuid":["/usr/local/bin/nnp"]}`)

// agnhostUsers is what agnhost's Dockerfile adds to Alpine's /etc/passwd and /etc/group
// (adduser -u 1000 -D user-defined-in-image; addgroup -g 50000 group-defined-in-image).
const agnhostUsers = `"users":[{"name":"user-defined-in-image","uid":1000,"gid":1000}],` +
	`"groups":[{"name":"user-defined-in-image","gid":1000,"members":[]},{"name":"group-defined-in-image","gid":50000,"members":["user-defined-in-image"]}]`

var (
	agnhost  = []byte(`{"base":"agnhost",` + agnhostUsers + `}`)
	kitten   = []byte(`{"base":"agnhost",` + agnhostUsers + `,"files":{"/data.json":"{\n  \"image\": \"kitten.jpg\"\n}\n"}}`)
	nautilus = []byte(`{"base":"agnhost",` + agnhostUsers + `,"files":{"/data.json":"{\n  \"image\": \"nautilus.jpg\"\n}\n"}}`)
)

// hostnetNginx is the content difference of critest's hostnet-nginx images: the server listens
// on port 12003 (read by the process simulation, see cri-fake/process README "Image behaviour").
var hostnetNginx = []byte(`{"base":"nginx","files":{"/etc/nginx/conf.d/default.conf":"server {\n    listen 12003;\n    root /usr/share/nginx/html;\n}\n"}}`)
