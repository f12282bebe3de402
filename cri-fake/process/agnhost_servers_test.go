package process

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// agnhostServer starts agnhost with args in an agnhost image view, its servers on loopback
// ports of the test (Spec.Listen), and returns the process, its output and the listen registry.
func agnhostServer(t *testing.T, args []string, env []string, extra map[string]string) (*Process, *syncBuffer, *loopbackListen) {
	t.Helper()
	ll := &loopbackListen{}
	var out syncBuffer
	fsys := agnhostFS(t, FSConfig{Hostname: "srv-1"})
	for p, c := range extra {
		if err := fsys.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startProc(t, Spec{Args: append([]string{"/agnhost"}, args...), Env: env, FS: fsys, Hostname: "srv-1", Listen: ll.listen, Stdout: &out, Stderr: &out})
	return p, &out, ll
}

// request is one HTTP exchange with a server and what must come back.
type request struct {
	method, path, contentType, body string
	header                          map[string]string
	status                          int
	want                            string // regexp over the body
	wantHeader                      map[string]string
	log                             string // regexp the program's output must come to match
}

func doRequest(t *testing.T, client *http.Client, base string, r request, out *syncBuffer) {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, r.path, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != r.status || !regexp.MustCompile(r.want).Match(body) {
		t.Errorf("%s %s: %d %q, want %d matching %q", method, r.path, resp.StatusCode, body, r.status, r.want)
	}
	for k, v := range r.wantHeader {
		if k == "Connection" && v == "close" {
			// net/http's client takes the header into Response.Close.
			if !resp.Close {
				t.Errorf("%s %s: connection not closed", method, r.path)
			}
			continue
		}
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s %s: header %s %q, want %q", method, r.path, k, got, v)
		}
	}
	if r.log != "" {
		re := regexp.MustCompile(r.log)
		waitFor(t, "log line "+r.log, func() bool { return re.MatchString(out.String()) })
	}
}

// TestAgnhostHTTPServers: each server subcommand's endpoints answer as upstream's handlers do,
// and log the lines upstream logs (test/images/agnhost/<subcommand>/*.go, lines cited).
func TestAgnhostHTTPServers(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   []string
		files map[string]string
		port  string
		tls   bool
		reqs  []request
	}{
		{name: "netexec", args: []string{"netexec", "--http-port=8083", "--udp-port=8081"}, env: []string{"NODE_NAME=node-1"}, port: ":8083", reqs: []request{
			// netexec.go:260-273 echo with its log line; :334 hostname; :623 hostName.
			{path: "/echo?msg=poststart", status: 200, want: `^poststart$`, log: `\d{4}/\d\d/\d\d \d\d:\d\d:\d\d GET /echo\?msg=poststart&code=\n`},
			{path: "/echo?msg=x&code=201", status: 201, want: `^x$`},
			{path: "/echo?msg=x&code=abc", status: 200, want: `^argument 'code' must be an integer or empty, got "abc"\n$`},
			{path: "/hostname", status: 200, want: `^srv-1$`, log: `GET /hostname\n`},
			{path: "/hostName", status: 200, want: `^srv-1$`, log: `GET /hostName\n`},
			{path: "/", status: 200, want: `^NOW: \d{4}-`},
			{path: "/clientip", status: 200, want: `^127\.0\.0\.1:\d+$`},
			{path: "/serverport", status: 200, want: `^8083$`},
			{path: "/header?key=X-Test", header: map[string]string{"X-Test": "v"}, status: 200, want: `^v$`},
			{path: "/envvar?var=NODE_NAME", status: 200, want: `^node-1$`},
			{path: "/envvar?var=NOPE", status: 500, want: `env var "NOPE" is not set`},
			{path: "/redirect?location=/echo%3Fmsg%3Dr&code=307", status: 200, want: `^r$`},
			// netexec.go:356-363: 200 once the UDP server runs.
			{path: "/healthz", status: 200, want: `^$`},
			{path: "/readyz", status: 200, want: `^ok$`},
			// netexec.go:535-556: /bin/sh -c, the combined output and the error as JSON.
			{path: "/shell?cmd=echo+hi", status: 200, want: `^\{"output":"hi\\n"\}$`, log: `GET /shell\?cmd=echo hi\n`},
			{path: "/shell?cmd=exit+3", status: 200, want: `^\{"error":"exit status 3"\}$`},
			// netexec.go:421-425: an empty host:port resolves (the local system, port 0); the dial fails.
			{path: "/dial?request=hostname", status: 200, want: `^\{"errors":\["Get \\"http://:0/hostname\\": `},
			{path: "/dial?host=1.2.3.4&port=80", status: 400, want: `^request parameter not specified\. <nil>\n$`},
			{path: "/dial?host=1.2.3.4&port=80&request=x&protocol=sctp", status: 400, want: `sctp is not simulated`},
			// netexec.go:558-621: the file lands in /uploads, mode 0700, its name answered.
			{method: "POST", path: "/upload", contentType: "multipart/form-data; boundary=b",
				body:   "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nuploaded\r\n--b--\r\n",
				status: 201, want: `^\{"output":"/uploads/upload\d+"\}$`, log: `Wrote upload to /uploads/upload\d+\n`},
			{method: "POST", path: "/upload", status: 200, want: `^\{"error":"Unable to upload file\."\}$`},
		}},
		// netexec without a UDP server is never healthy (netexec.go: serverReady is set by it).
		{name: "netexec --udp-port=-1", args: []string{"netexec", "--http-port=8080", "--udp-port=-1"}, port: ":8080", reqs: []request{
			{path: "/healthz", status: 412, want: `^$`},
			{path: "/readyz", status: 412, want: `^$`},
		}},
		{name: "netexec --http-override", args: []string{"netexec", "--http-override=/hostname", "--udp-port=-1"}, port: ":8080", reqs: []request{
			{path: "/anything", status: 200, want: `^srv-1$`},
		}},
		{name: "netexec https", args: []string{"netexec", "--tls-cert-file=/localhost.crt", "--tls-private-key-file=/localhost.key", "--udp-port=-1"}, port: ":8080", tls: true, reqs: []request{
			{path: "/hostname", status: 200, want: `^srv-1$`},
		}},
		// test-webserver.go:35-46: FileServer at / with these headers.
		{name: "test-webserver", args: []string{"test-webserver", "--port=8080"}, files: map[string]string{"/data.json": "{\n  \"image\": \"kitten.jpg\"\n}\n"}, port: ":8080", reqs: []request{
			{path: "/data.json", status: 200, want: `^\{\n  "image": "kitten\.jpg"\n\}\n$`, wantHeader: map[string]string{
				"Access-Control-Allow-Origin": "*", "Cache-Control": "private", "Content-Type": "application/json"}},
			{path: "/localhost.crt", status: 200, want: `^-----BEGIN CERTIFICATE-----`},
			{path: "/nothing", status: 404, want: `^404 page not found\n$`},
			{path: "/etc/", status: 200, want: `<a href="os-release">os-release</a>`},
		}},
		// serve_hostname.go:84-97: the host name over HTTP, "HTTP request from" logged.
		{name: "serve-hostname", args: []string{"serve-hostname"}, port: ":9376", reqs: []request{
			{path: "/", status: 200, want: `^srv-1$`, log: `HTTP request from 127\.0\.0\.1:\d+\n`},
		}},
		{name: "serve-hostname --close", args: []string{"serve-hostname", "--close", "--port=9377"}, port: ":9377", reqs: []request{
			{path: "/", status: 200, want: `^srv-1$`, wantHeader: map[string]string{"Connection": "close"}},
		}},
		// liveness/server.go:36-60.
		{name: "liveness", args: []string{"liveness"}, port: ":8080", reqs: []request{
			{path: "/healthz", status: 200, want: `^ok$`},
			{path: "/started", status: 200, want: `^\d`},
			{path: "/redirect?loc=%2Fhealthz", status: 200, want: `^ok$`},
		}},
		// porter/porter.go:103-125.
		{name: "porter", args: []string{"porter"}, env: []string{"SERVE_PORT_9080=foo", "SERVE_TCP_PORT_9081=bar"}, port: ":9080", reqs: []request{
			{path: "/", status: 200, want: `^foo$`},
		}},
		{name: "porter --json-response", args: []string{"porter", "--json-response"}, env: []string{"SERVE_PORT_9080=foo"}, port: ":9080", reqs: []request{
			{method: "POST", path: "/", status: 200, want: `^\{"Method":"POST","Body":"foo"\}$`, wantHeader: map[string]string{"Content-Type": "application/json"}},
		}},
		{name: "porter TLS", args: []string{"porter"}, env: []string{"SERVE_TLS_PORT_9443=tls foo"}, port: ":9443", tls: true, reqs: []request{
			{path: "/", status: 200, want: `^tls foo$`},
		}},
		// nettest.go:97-150: /write counts the source, /read shows the state.
		{name: "nettest", args: []string{"nettest"}, port: ":8080", reqs: []request{
			{method: "POST", path: "/write", body: `{"Source": "prestop"}`, status: 200, want: `^\{"Hostname":"srv-1"\}\n$`},
			{path: "/read", status: 200, want: `(?s)^\{\n\t"Hostname": "srv-1",\n\t"Sent": null,\n\t"Received": \{\n\t\t"prestop": 1\n\t\},\n\t"Errors": null,\n.*"StillContactingPeers": true\n\}$`},
			{path: "/status", status: 200, want: `^running$`},
		}},
		// guestbook.go:155-237 (the store; /guestbook needs DNS: TestAgnhostInNetNS).
		{name: "guestbook", args: []string{"guestbook", "--http-port=8080"}, port: ":8080", reqs: []request{
			{path: "/set?key=messages&value=hello", status: 200, want: `^\{"message":"Updated"\}$`, log: `GET /set\?key=messages&value=hello\n`},
			{path: "/get?key=messages", status: 200, want: `^\{"data":"hello"\}$`},
			{path: "/get", status: 200, want: `^\{"data":\{"messages":"hello"\}\}$`},
			{path: "/set?value=x", status: 400, want: `^cannot set with empty key\.\n$`},
			{path: "/guestbook?cmd=del", status: 400, want: `^unsupported cmd: 'del'\n$`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, out, ll := agnhostServer(t, tc.args, tc.env, tc.files)
			waitFor(t, "listener on "+tc.port, func() bool { return ll.addr(tc.port) != "" })
			scheme := "http://"
			client := &http.Client{Timeout: time.Minute}
			if tc.tls {
				scheme = "https://"
				client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
			}
			for _, r := range tc.reqs {
				doRequest(t, client, scheme+ll.addr(tc.port), r, out)
			}
		})
	}
}

// TestAgnhostExits: the endpoints and signals that end a server, with upstream's exit codes.
func TestAgnhostExits(t *testing.T) {
	t.Run("netexec /exit", func(t *testing.T) {
		p, _, ll := agnhostServer(t, []string{"netexec", "--udp-port=-1"}, nil, nil)
		waitFor(t, "listener", func() bool { return ll.addr(":8080") != "" })
		http.Get("http://" + ll.addr(":8080") + "/exit?code=7")
		if code := p.Wait(); code != 7 {
			t.Errorf("exit code %d, want 7", code)
		}
	})
	t.Run("netexec TERM is 0", func(t *testing.T) {
		p, _, ll := agnhostServer(t, []string{"netexec", "--udp-port=-1"}, nil, nil)
		waitFor(t, "listener", func() bool { return ll.addr(":8080") != "" })
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
	})
	t.Run("serve-hostname waits for deletion after TERM", func(t *testing.T) {
		p, out, ll := agnhostServer(t, []string{"serve-hostname"}, nil, nil)
		waitFor(t, "listener", func() bool { return ll.addr(":9376") != "" })
		p.Signal(syscall.SIGTERM)
		waitFor(t, "the shutdown lines", func() bool {
			return strings.Contains(out.String(), "Shutting down after receiving signal: terminated.\n") && strings.Contains(out.String(), "Awaiting pod deletion.\n")
		})
		if _, done := p.ExitCode(); done {
			t.Fatal("serve-hostname ended at once; upstream sleeps 60 s")
		}
		p.Signal(syscall.SIGKILL)
		if code := p.Wait(); code != 137 {
			t.Errorf("exit code %d, want 137", code)
		}
	})
	t.Run("test-webserver has no TERM handler", func(t *testing.T) {
		p, _, ll := agnhostServer(t, []string{"test-webserver"}, nil, nil)
		waitFor(t, "listener", func() bool { return ll.addr(":80") != "" })
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(); code != 143 {
			t.Errorf("exit code %d, want 143", code)
		}
	})
	t.Run("serve-hostname http and tcp refused", func(t *testing.T) {
		_, errOut, code := runCmd(t, Spec{Args: []string{"/agnhost", "serve-hostname", "--tcp"}, FS: agnhostFS(t, FSConfig{}), Listen: (&loopbackListen{}).listen})
		if code != 1 || !strings.HasSuffix(errOut, " Can't server TCP/UDP mode and HTTP mode at the same time\n") {
			t.Errorf("code %d stderr %q", code, errOut)
		}
	})
}

// TestAgnhostGRPCHealth: grpc-health-checking.go:73-95 answers the gRPC health service.
func TestAgnhostGRPCHealth(t *testing.T) {
	_, _, ll := agnhostServer(t, []string{"grpc-health-checking", "--service=svc"}, nil, nil)
	waitFor(t, "listeners", func() bool { return ll.addr(":5000") != "" && ll.addr(":8080") != "" })
	conn, err := grpc.NewClient(ll.addr(":5000"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := healthpb.NewHealthClient(conn)
	resp, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check(svc): %v %v", resp, err)
	}
	if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(other): %v, want NotFound", err)
	}
	http.Get("http://" + ll.addr(":8080") + "/make-not-serving")
	if resp, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "svc"}); err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after /make-not-serving: %v %v", resp, err)
	}
}

// admissionReview is an AdmissionReview as the API server sends it.
func admissionReview(version, resource, operation, object string) string {
	group, res := "", resource
	if strings.Contains(resource, ".") {
		res, group, _ = strings.Cut(resource, ".")
	}
	ver := "v1"
	if group == "apiextensions.k8s.io" {
		ver = "v1"
	}
	return fmt.Sprintf(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/%s","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"X"},`+
		`"resource":{"group":%q,"version":%q,"resource":%q},"name":"n","namespace":"ns","operation":%q,"userInfo":{},"object":%s,"oldObject":null}}`,
		version, group, ver, res, operation, object)
}

// TestAgnhostWebhook: webhook/main.go and its handlers answer real AdmissionReview JSON with
// upstream's decisions, messages and patches, over TLS.
func TestAgnhostWebhook(t *testing.T) {
	_, _, ll := agnhostServer(t, []string{"webhook", "--tls-cert-file=/localhost.crt", "--tls-private-key-file=/localhost.key", "--port=8444"}, nil, nil)
	waitFor(t, "listener", func() bool { return ll.addr(":8444") != "" })
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://" + ll.addr(":8444")
	pod := func(labels, containers string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"webhook-to-be-mutated","labels":%s},"spec":{"containers":%s}}`, labels, containers)
	}
	const js = "application/json"
	var out syncBuffer
	for _, r := range []request{
		{method: "POST", path: "/always-deny", contentType: js, body: admissionReview("v1", "pods", "CREATE", pod(`{}`, `[]`)), status: 200,
			want: `^\{"kind":"AdmissionReview","apiVersion":"admission\.k8s\.io/v1","response":\{"uid":"u-1","allowed":false,"status":\{"metadata":\{\},"message":"this webhook denies all requests"\}\}\}$`},
		{method: "POST", path: "/always-deny", contentType: js, body: admissionReview("v1beta1", "pods", "CREATE", pod(`{}`, `[]`)), status: 200,
			want: `^\{"kind":"AdmissionReview","apiVersion":"admission\.k8s\.io/v1beta1","response":\{"uid":"u-1","allowed":false,"status":\{"metadata":\{\},"message":"this webhook denies all requests"\}\}\}$`},
		// addlabel.go: the first label is added as a map, a later one as a key.
		{method: "POST", path: "/add-label", contentType: js, body: admissionReview("v1", "configmaps", "CREATE", `{"metadata":{"name":"c"}}`), status: 200,
			want: `"allowed":true,"patch":"` + regexp.QuoteMeta("WwogICAgICAgICB7ICJvcCI6ICJhZGQiLCAicGF0aCI6ICIvbWV0YWRhdGEvbGFiZWxzIiwgInZhbHVlIjogeyJhZGRlZC1sYWJlbCI6ICJ5ZXMifX0KICAgICBd") + `","patchType":"JSONPatch"`},
		{method: "POST", path: "/add-label", contentType: js, body: admissionReview("v1", "configmaps", "CREATE", `{"metadata":{"labels":{"added-label":"yes"}}}`), status: 200,
			want: `^\{"kind":"AdmissionReview","apiVersion":"admission\.k8s\.io/v1","response":\{"uid":"u-1","allowed":true\}\}$`},
		// pods.go admitPods.
		{method: "POST", path: "/pods", contentType: js, body: admissionReview("v1", "pods", "CREATE", pod(`{"webhook-e2e-test":"webhook-disallow"}`, `[{"name":"c"}]`)), status: 200,
			want: `"allowed":false,"status":\{"metadata":\{\},"message":"the pod contains unwanted label;"\}`},
		{method: "POST", path: "/pods", contentType: js, body: admissionReview("v1", "pods", "CREATE", pod(`{}`, `[{"name":"webhook-disallow"}]`)), status: 200,
			want: `"message":"the pod contains unwanted container name;"`},
		{method: "POST", path: "/pods", contentType: js, body: admissionReview("v1", "configmaps", "CREATE", `{}`), status: 200,
			want: `"allowed":false,"status":\{"metadata":\{\},"message":"expect resource to be \{ v1 pods\}"\}`},
		{method: "POST", path: "/mutating-pods", contentType: js, body: admissionReview("v1", "pods", "CREATE", pod(`{}`, `[]`)), status: 200,
			want: `"allowed":true,"patch":"[^"]+","patchType":"JSONPatch"`},
		{method: "POST", path: "/pods/attach", contentType: js, body: strings.Replace(admissionReview("v1", "pods", "CONNECT", `{"kind":"PodAttachOptions","stdin":true,"container":"container1"}`), `"name":"n"`, `"name":"to-be-attached-pod","subResource":"attach"`, 1), status: 200,
			want: `"allowed":false,"status":\{"metadata":\{\},"message":"attaching to pod 'to-be-attached-pod' is not allowed"\}`},
		// configmap.go: the reason, not the message.
		{method: "POST", path: "/configmaps", contentType: js, body: admissionReview("v1", "configmaps", "CREATE", `{"data":{"webhook-e2e-test":"webhook-disallow"}}`), status: 200,
			want: `"allowed":false,"status":\{"metadata":\{\},"reason":"the configmap contains unwanted key and value"\}`},
		{method: "POST", path: "/configmaps", contentType: js, body: strings.Replace(admissionReview("v1", "configmaps", "DELETE", `null`), `"oldObject":null`, `"oldObject":{"data":{"webhook-e2e-test":"webhook-nondeletable"}}`, 1), status: 200,
			want: `"reason":"the configmap cannot be deleted because it contains unwanted key and value"`},
		{method: "POST", path: "/mutating-configmaps", contentType: js, body: admissionReview("v1", "configmaps", "CREATE", `{"data":{"mutation-start":"yes"}}`), status: 200,
			want: `"allowed":true,"patch":"` + regexp.QuoteMeta("WwogICAgICAgICB7ICJvcCI6ICJhZGQiLCAicGF0aCI6ICIvZGF0YS9tdXRhdGlvbi1zdGFnZS0xIiwgInZhbHVlIjogInllcyIgfQogICAgIF0=") + `"`},
		{method: "POST", path: "/custom-resource", contentType: js, body: admissionReview("v1", "e2e-test-crds.stable.example.com", "CREATE", `{"data":{"webhook-e2e-test":"webhook-disallow"}}`), status: 200,
			want: `"reason":"the custom resource contains unwanted data"`},
		{method: "POST", path: "/crd", contentType: js, body: admissionReview("v1", "customresourcedefinitions.apiextensions.k8s.io", "CREATE", `{"metadata":{"labels":{"webhook-e2e-test":"webhook-disallow"}}}`), status: 200,
			want: `"allowed":false,"status":\{"metadata":\{\},"message":"the crd contains unwanted label"\}`},
		// main.go:109-124: the wrong content type gets nothing; an undecodable body a 400.
		{method: "POST", path: "/always-deny", contentType: "text/plain", body: "{}", status: 200, want: `^$`},
		{method: "POST", path: "/always-deny", contentType: js, body: "not json", status: 400, want: `^Request could not be decoded: `},
		{method: "POST", path: "/always-deny", contentType: js, body: `{"kind":"Pod","apiVersion":"v1"}`, status: 400, want: `^Unsupported group version kind: /v1, Kind=Pod\n$`},
		{path: "/readyz", status: 200, want: `^ok$`},
	} {
		doRequest(t, client, base, r, &out)
	}
	// A handler that has no answer for the resource drops the connection (upstream panics).
	req, _ := http.NewRequest("POST", base+"/configmaps", strings.NewReader(admissionReview("v1", "pods", "CREATE", `{}`)))
	req.Header.Set("Content-Type", js)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("configmaps webhook with a pod: %d, want the connection dropped", resp.StatusCode)
	}
}

// TestAgnhostCRDConversion: converter/example_converter.go and framework.go convert the e2e
// CRD's objects between v1 and v2 in ConversionReview JSON and YAML.
func TestAgnhostCRDConversion(t *testing.T) {
	_, _, ll := agnhostServer(t, []string{"crd-conversion-webhook", "--tls-cert-file=/localhost.crt", "--tls-private-key-file=/localhost.key", "--port=8444"}, nil, nil)
	waitFor(t, "listener", func() bool { return ll.addr(":8444") != "" })
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://" + ll.addr(":8444")
	review := func(version, desired, obj string) string {
		return fmt.Sprintf(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/%s","request":{"uid":"c-1","desiredAPIVersion":%q,"objects":[%s]}}`, version, desired, obj)
	}
	var out syncBuffer
	for _, r := range []request{
		{method: "POST", path: "/crdconvert", contentType: "application/json",
			body:   review("v1", "stable.example.com/v2", `{"apiVersion":"stable.example.com/v1","kind":"E2e-test-crd","metadata":{"name":"cr"},"hostPort":"localhost:7070"}`),
			status: 200, want: `^\{"kind":"ConversionReview","apiVersion":"apiextensions\.k8s\.io/v1","request":\{"uid":"","desiredAPIVersion":"","objects":null\},` +
				`"response":\{"uid":"c-1","convertedObjects":\[\{"apiVersion":"stable\.example\.com/v2","host":"localhost","kind":"E2e-test-crd","metadata":\{"name":"cr"\},"port":"7070"\}\],"result":\{"metadata":\{\},"status":"Success"\}\}\}\n$`},
		{method: "POST", path: "/crdconvert", contentType: "application/json",
			body:   review("v1beta1", "stable.example.com/v1", `{"apiVersion":"stable.example.com/v2","kind":"E2e-test-crd","host":"h","port":"1"}`),
			status: 200, want: `"convertedObjects":\[\{"apiVersion":"stable\.example\.com/v1","hostPort":"h:1","kind":"E2e-test-crd"\}\]`},
		{method: "POST", path: "/crdconvert", contentType: "application/json",
			body:   review("v1", "stable.example.com/v2", `{"apiVersion":"stable.example.com/v1","kind":"E2e-test-crd","hostPort":"bad"}`),
			status: 200, want: `"result":\{"metadata":\{\},"status":"Failure","message":"invalid hostPort value ` + "`bad`" + `"\}`},
		{method: "POST", path: "/crdconvert", contentType: "application/yaml", header: map[string]string{"Accept": "application/yaml"},
			body:   "apiVersion: apiextensions.k8s.io/v1\nkind: ConversionReview\nrequest:\n  uid: y-1\n  desiredAPIVersion: stable.example.com/v2\n  objects:\n  - apiVersion: stable.example.com/v1\n    kind: CronTab\n    hostPort: localhost:7070\n",
			status: 200, want: `(?s)response:\n  convertedObjects:\n  - apiVersion: stable\.example\.com/v2\n    host: localhost\n    kind: CronTab\n    port: "7070"\n.*  uid: y-1\n`},
		{method: "POST", path: "/crdconvert", contentType: "text/plain", body: "{}", status: 400, want: "^invalid Content-Type header `text/plain`\n$"},
		{method: "POST", path: "/crdconvert", contentType: "application/json", header: map[string]string{"Accept": "text/html"}, body: review("v1", "stable.example.com/v2", ""), status: 400, want: "^invalid accept header `text/html`\n$"},
		{path: "/readyz", status: 200, want: `^ok$`},
	} {
		doRequest(t, client, base, r, &out)
	}
}
