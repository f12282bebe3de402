package netapplets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// curlVersion is the agnhost image's curl (Alpine 3.21's package).
const curlVersion = "8.12.1"

// curlOpts are curl's options that are simulated.
type curlOpts struct {
	silent, showError, fail, include, head, location, insecure, verbose bool
	output, writeOut, method, iface, cacert, userAgent                  string
	data                                                                *string
	headers                                                             []string
	connectTimeout, maxTime                                             time.Duration
	urls                                                                []string
}

// curlError is a transfer's failure: curl's exit code and its message.
type curlError struct {
	code int
	msg  string
}

func (e *curlError) Error() string { return fmt.Sprintf("curl: (%d) %s", e.code, e.msg) }

// curlLong maps curl's long options to their short letter (or themselves) and whether they take
// a value.
var curlLong = map[string]struct {
	short string
	value bool
}{
	"globoff": {"g", false}, "silent": {"s", false}, "show-error": {"S", false}, "fail": {"f", false},
	"include": {"i", false}, "head": {"I", false}, "location": {"L", false}, "insecure": {"k", false},
	"verbose": {"v", false}, "output": {"o", true}, "write-out": {"w", true}, "request": {"X", true},
	"data": {"d", true}, "data-raw": {"d", true}, "data-binary": {"d", true}, "data-ascii": {"d", true},
	"header": {"H", true}, "max-time": {"m", true}, "user-agent": {"A", true}, "ipv4": {"4", false},
	"ipv6": {"6", false}, "connect-timeout": {"connect-timeout", true}, "interface": {"interface", true},
	"cacert": {"cacert", true}, "disable": {"q", false}, "no-progress-meter": {"no-progress-meter", false},
	"http1.1": {"http1.1", false}, "compressed": {"compressed", false}, "no-keepalive": {"no-keepalive", false},
}

// curlShortValue are the short options that take a value.
const curlShortValue = "owXdHmAe"

func parseCurlArgs(args []string) (curlOpts, error) {
	o := curlOpts{userAgent: "curl/" + curlVersion}
	seconds := func(v string) (time.Duration, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1e9 {
			return 0, fmt.Errorf("expected a proper numerical parameter")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	set := func(name, v string) error {
		var err error
		switch name {
		case "g", "q", "4", "6", "http1.1", "compressed", "no-keepalive":
		case "no-progress-meter":
			o.silent = true
			o.showError = true
		case "s":
			o.silent = true
		case "S":
			o.showError = true
		case "f":
			o.fail = true
		case "i":
			o.include = true
		case "I":
			o.head = true
		case "L":
			o.location = true
		case "k":
			o.insecure = true
		case "v":
			o.verbose = true
		case "o":
			o.output = v
		case "w":
			o.writeOut = v
		case "X":
			o.method = v
		case "d":
			if o.data != nil {
				v = *o.data + "&" + v
			}
			o.data = &v
		case "H":
			o.headers = append(o.headers, v)
		case "A":
			o.userAgent = v
		case "e":
		case "m":
			o.maxTime, err = seconds(v)
		case "connect-timeout":
			o.connectTimeout, err = seconds(v)
		case "interface":
			o.iface = v
		case "cacert":
			o.cacert = v
		default:
			return fmt.Errorf("option -%s: is unknown", name)
		}
		return err
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.urls = append(o.urls, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			spec, ok := curlLong[name]
			if !ok {
				return o, fmt.Errorf("option %s: is unknown", a)
			}
			if spec.value && !hasV {
				if i+1 >= len(args) {
					return o, fmt.Errorf("option %s: requires parameter", a)
				}
				i++
				v = args[i]
			}
			if err := set(spec.short, v); err != nil {
				return o, fmt.Errorf("option %s: %v", a, err)
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j : j+1]
				if strings.Contains(curlShortValue, c) {
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							return o, fmt.Errorf("option -%s: requires parameter", c)
						}
						i++
						v = args[i]
					}
					if err := set(c, v); err != nil {
						return o, fmt.Errorf("option -%s: %v", c, err)
					}
					break
				}
				if err := set(c, ""); err != nil {
					return o, err
				}
			}
		default:
			o.urls = append(o.urls, a)
		}
	}
	if len(o.urls) == 0 {
		return o, errors.New("no URL specified")
	}
	return o, nil
}

// Curl is curl for http:// and https:// URLs, run in the agnhost image by the e2e specs (`curl -g
// -q -s 'http://IP:9080/dial?...'`, `curl -s -o /dev/null -w %{http_code} ...`): the request goes
// out from the container's network namespace, a host name resolved through the container's
// resolv.conf and hosts. Options: -s -S -f -i -I -L -k -v -o -w -X -d -H -A -m --connect-timeout
// --interface --cacert (-g -q -4 -6 accepted). Errors and exit codes are curl's: (6) Could not
// resolve host, (7) Failed to connect, (28) timeouts, (22) with -f, (52) Empty reply from server;
// printed unless -s (or with -sS). The progress meter of a non-terminal stdout is not drawn.
func Curl(p *kernel.Proc) int {
	o, err := parseCurlArgs(p.Args[1:])
	if err != nil {
		fmt.Fprintf(p.Stderr, "curl: %v\ncurl: try 'curl --help' or 'curl --manual' for more information\n", err)
		return 2
	}
	code := 0
	for _, u := range o.urls {
		if c := curlOne(p, o, u); c != 0 {
			code = c
		}
	}
	return code
}

func curlOne(p *kernel.Proc, o curlOpts, raw string) int {
	start := time.Now()
	status, written, remote, cerr := curlTransfer(p, o, raw)
	if o.writeOut != "" {
		fmt.Fprint(p.Stdout, curlWriteOut(o.writeOut, status, written, remote, time.Since(start), raw, cerr))
	}
	if cerr == nil {
		return 0
	}
	if code, killed := kernel.ExitCause(p.Ctx()); killed {
		return code
	}
	if !o.silent || o.showError {
		fmt.Fprintln(p.Stderr, cerr.Error())
	}
	return cerr.code
}

// curlTransfer does one request; it returns the status, the body bytes written, the remote
// address and curl's error.
func curlTransfer(p *kernel.Proc, o curlOpts, raw string) (int, int64, string, *curlError) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw // curl guesses http:// for a URL without a scheme
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return 0, 0, "", &curlError{3, "URL rejected: Malformed input to a URL function"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return 0, 0, "", &curlError{1, fmt.Sprintf("Protocol \"%s\" not supported", u.Scheme)}
	}
	ctx, cancel := context.WithCancel(p.Ctx())
	defer cancel()
	if o.maxTime > 0 {
		ctx, cancel = context.WithTimeout(p.Ctx(), o.maxTime)
		defer cancel()
	}
	started := time.Now()
	remote := ""
	var dialErr *curlError
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := resolv.LookupHost(ctx, p, host)
		if err != nil || len(ips) == 0 {
			dialErr = &curlError{6, "Could not resolve host: " + host}
			return nil, dialErr
		}
		dctx := ctx
		if o.connectTimeout > 0 {
			var c context.CancelFunc
			dctx, c = context.WithTimeout(ctx, o.connectTimeout)
			defer c()
		}
		var first error
		for _, ip := range ips {
			remote = net.JoinHostPort(ip.String(), port)
			conn, err := p.DialFrom(dctx, "tcp", o.iface, remote)
			if err == nil {
				return conn, nil
			}
			if first == nil {
				first = err
			}
		}
		ms := time.Since(started).Milliseconds()
		switch {
		case dctx.Err() != nil && ctx.Err() == nil:
			dialErr = &curlError{28, fmt.Sprintf("Connection timed out after %d milliseconds", ms)}
		case ctx.Err() != nil:
			dialErr = &curlError{28, fmt.Sprintf("Connection timed out after %d milliseconds", ms)}
		default:
			dialErr = &curlError{7, fmt.Sprintf("Failed to connect to %s port %s after %d ms: Could not connect to server", host, port, ms)}
		}
		return nil, first
	}
	tlsConf := &tls.Config{InsecureSkipVerify: o.insecure, ServerName: u.Hostname()}
	if o.cacert != "" {
		pem, err := p.ReadFileBounded(p.Abs(o.cacert))
		if err != nil {
			return 0, 0, "", &curlError{77, fmt.Sprintf("error setting certificate file: %s", o.cacert)}
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsConf.RootCAs = pool
	} else {
		tlsConf.RootCAs = x509.NewCertPool() // the image's CA bundle is not simulated
	}
	tr := &http.Transport{
		Proxy:              nil,
		DialContext:        dial,
		TLSClientConfig:    tlsConf,
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		if !o.location {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	method := http.MethodGet
	var body io.Reader
	if o.data != nil {
		method = http.MethodPost
		body = strings.NewReader(*o.data)
	}
	if o.head {
		method = http.MethodHead
	}
	if o.method != "" {
		method = o.method
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, 0, "", &curlError{3, "URL rejected: Malformed input to a URL function"}
	}
	req.Header.Set("User-Agent", o.userAgent)
	req.Header.Set("Accept", "*/*")
	if o.data != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			continue
		}
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if o.verbose {
		fmt.Fprintf(p.Stderr, "> %s %s HTTP/1.1\n> Host: %s\n> User-Agent: %s\n> Accept: */*\n>\n", method, req.URL.RequestURI(), u.Host, o.userAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		if dialErr != nil {
			return 0, 0, remote, dialErr
		}
		return 0, 0, remote, curlRequestError(err, ctx, started)
	}
	defer resp.Body.Close()
	if o.verbose {
		fmt.Fprintf(p.Stderr, "< %s %s\n", resp.Proto, resp.Status)
	}
	if o.fail && resp.StatusCode >= 400 {
		return resp.StatusCode, 0, remote, &curlError{22, fmt.Sprintf("The requested URL returned error: %d", resp.StatusCode)}
	}
	var w io.Writer = p.Stdout
	if o.output != "" && o.output != "-" {
		f, err := p.OpenWrite(p.Abs(o.output), false, 0o644)
		if err != nil {
			return resp.StatusCode, 0, remote, &curlError{23, fmt.Sprintf("Failure writing output to destination, passed 0 returned %d", -1)}
		}
		defer f.Close()
		w = f
	}
	if o.include || o.head {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\r\n", resp.Proto, resp.Status)
		keys := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range resp.Header[k] {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
		if resp.ContentLength >= 0 && resp.Header.Get("Content-Length") == "" && method != http.MethodHead {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", resp.ContentLength)
		}
		b.WriteString("\r\n")
		io.WriteString(w, b.String())
	}
	n, err := libbb.Copy(p, w, resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return resp.StatusCode, n, remote, &curlError{28, fmt.Sprintf("Operation timed out after %d milliseconds with %d bytes received", time.Since(started).Milliseconds(), n)}
		}
		return resp.StatusCode, n, remote, &curlError{56, "Recv failure: " + vfs.Strerror(err)}
	}
	return resp.StatusCode, n, remote, nil
}

// curlRequestError words a failed request (after the connection) as curl does.
func curlRequestError(err error, ctx context.Context, started time.Time) *curlError {
	ms := time.Since(started).Milliseconds()
	var errno syscall.Errno
	var tlsErr x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case ctx.Err() != nil:
		return &curlError{28, fmt.Sprintf("Operation timed out after %d milliseconds with 0 bytes received", ms)}
	case errors.As(err, &tlsErr):
		return &curlError{60, "SSL certificate problem: unable to get local issuer certificate"}
	case errors.As(err, &hostErr):
		return &curlError{60, "SSL: no alternative certificate subject name matches target host name"}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &curlError{52, "Empty reply from server"}
	case errors.As(err, &errno) && errno == syscall.ECONNRESET:
		return &curlError{56, "Recv failure: Connection reset by peer"}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &curlError{28, fmt.Sprintf("Operation timed out after %d milliseconds with 0 bytes received", ms)}
	}
	return &curlError{35, "TLS connect error: " + err.Error()}
}

// curlWriteOut expands -w's variables and escapes (curl's writeout.c; the common ones).
func curlWriteOut(format string, status int, size int64, remote string, total time.Duration, raw string, cerr *curlError) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '\\' && i+1 < len(format) {
			i++
			switch format[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte('\\')
				b.WriteByte(format[i])
			}
			continue
		}
		if c == '%' && strings.HasPrefix(format[i:], "%{") {
			end := strings.IndexByte(format[i:], '}')
			if end > 0 {
				name := format[i+2 : i+end]
				i += end
				host, port, _ := net.SplitHostPort(remote)
				switch name {
				case "http_code", "response_code":
					fmt.Fprintf(&b, "%03d", status)
				case "size_download":
					fmt.Fprint(&b, size)
				case "time_total":
					fmt.Fprintf(&b, "%.6f", total.Seconds())
				case "url_effective", "url":
					b.WriteString(raw)
				case "remote_ip":
					b.WriteString(host)
				case "remote_port":
					b.WriteString(port)
				case "exitcode":
					code := 0
					if cerr != nil {
						code = cerr.code
					}
					fmt.Fprint(&b, code)
				case "errormsg":
					if cerr != nil {
						b.WriteString(cerr.msg)
					}
				}
				continue
			}
		}
		if c == '%' && strings.HasPrefix(format[i:], "%%") {
			i++
		}
		b.WriteByte(c)
	}
	return b.String()
}
