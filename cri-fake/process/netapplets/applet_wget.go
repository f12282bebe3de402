package netapplets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// wgetDefaultTimeout is busybox wget's network timeout when -T is not given (900 s,
// networking/wget.c G.timeout_seconds).
const wgetDefaultTimeout = 900 * time.Second

// wgetMaxRedirects bounds the redirects followed; busybox follows without a limit of its own, a
// server redirecting to itself forever would then hold the process forever.
const wgetMaxRedirects = 20

// wgetOpts are the busybox wget options simulated.
type wgetOpts struct {
	quiet, spider, serverResponse bool
	output                        string // -O: "-" is stdout, "" the URL's base name
	timeout                       time.Duration
	userAgent                     string
	headers                       []string
	urls                          []string
	// postData is --post-data's body (or --post-file's file name in postFile): a POST with
	// Content-Type application/x-www-form-urlencoded, as busybox sends it.
	postData, postFile *string
}

func parseWgetArgs(args []string) (wgetOpts, error) {
	o := wgetOpts{timeout: wgetDefaultTimeout, userAgent: "Wget"}
	value := func(i *int, a, name string) (string, error) {
		if v, ok := strings.CutPrefix(a, name+"="); ok && strings.HasPrefix(name, "--") {
			return v, nil
		}
		if !strings.HasPrefix(name, "--") && len(a) > len(name) {
			return a[len(name):], nil // -Ofile, -T5
		}
		if *i+1 >= len(args) {
			return "", fmt.Errorf("option requires an argument: %s", name)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		var v string
		switch {
		case a == "--":
			o.urls = append(o.urls, args[i+1:]...)
			i = len(args)
		case a == "-q" || a == "--quiet":
			o.quiet = true
		case a == "-S" || a == "--server-response":
			o.serverResponse = true
		case a == "--spider":
			o.spider = true
		case a == "-qO" || a == "-qO-":
			// The common `wget -qO- URL` / `wget -qO - URL` spelling.
			o.quiet = true
			if a == "-qO-" {
				o.output = "-"
			} else if v, err = value(&i, "-O", "-O"); err == nil {
				o.output = v
			}
		case strings.HasPrefix(a, "-O"):
			if v, err = value(&i, a, "-O"); err == nil {
				o.output = v
			}
		case a == "--output-document" || strings.HasPrefix(a, "--output-document="):
			if v, err = value(&i, a, "--output-document"); err == nil {
				o.output = v
			}
		case strings.HasPrefix(a, "-T"), a == "--timeout" || strings.HasPrefix(a, "--timeout="):
			name := "-T"
			if strings.HasPrefix(a, "--") {
				name = "--timeout"
			}
			if v, err = value(&i, a, name); err == nil {
				n, perr := strconv.Atoi(v)
				if perr != nil || n < 0 {
					err = fmt.Errorf("invalid number '%s'", v)
				} else if n > int(math.MaxInt64/time.Second) {
					// Past what a Duration holds: n × time.Second would wrap (negative or
					// short). Taken as no timeout, as -T 0 is (issue 17).
					o.timeout = 0
				} else {
					o.timeout = time.Duration(n) * time.Second
				}
			}
		case strings.HasPrefix(a, "-U"), a == "--user-agent" || strings.HasPrefix(a, "--user-agent="):
			name := "-U"
			if strings.HasPrefix(a, "--") {
				name = "--user-agent"
			}
			if v, err = value(&i, a, name); err == nil {
				o.userAgent = v
			}
		case a == "--post-data" || strings.HasPrefix(a, "--post-data="):
			if v, err = value(&i, a, "--post-data"); err == nil {
				o.postData = &v
			}
		case a == "--post-file" || strings.HasPrefix(a, "--post-file="):
			if v, err = value(&i, a, "--post-file"); err == nil {
				o.postFile = &v
			}
		case a == "--header" || strings.HasPrefix(a, "--header="):
			if v, err = value(&i, a, "--header"); err == nil {
				o.headers = append(o.headers, v)
			}
		case len(a) > 1 && a[0] == '-':
			err = fmt.Errorf("unrecognized option '%s'", a)
		default:
			o.urls = append(o.urls, a)
		}
		if err != nil {
			return o, err
		}
	}
	if len(o.urls) == 0 {
		return o, errors.New("URL is required")
	}
	return o, nil
}

// Wget is busybox wget for http:// URLs, the client the Kubernetes docs and e2e tests run
// in a busybox pod to reach another pod or a Service (`wget -qO- http://10.244.1.5:8080/`). It
// connects from the container's network namespace (Spec.NetNS; the node's for a host-network
// pod), so it reaches what that namespace routes to and nothing else. A host name is resolved
// through the container's /etc/hosts and resolv.conf (DNS from a pod's own namespace only). With
// Spec.Listen (no kernel namespace) there is no network to connect from.
func Wget(p *kernel.Proc) int {
	o, err := parseWgetArgs(p.Args[1:])
	if err != nil {
		p.Errorf("%v", err)
		fmt.Fprintln(p.Stderr, "Usage: wget [-cqS] [--spider] [-O FILE] [-T SEC] [-U AGENT] [--header 'HEADER: VALUE'] [--post-data STR | --post-file FILE] URL...")
		return 1
	}
	status := 0
	for _, u := range o.urls {
		if !wgetOne(p, o, u) {
			status = 1
			break // busybox stops at the first URL that fails
		}
	}
	return status
}

func wgetOne(p *kernel.Proc, o wgetOpts, raw string) bool {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw // busybox prepends http:// to a URL without a scheme
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		p.Errorf("bad address '%s'", raw)
		return false
	}
	switch u.Scheme {
	case "http":
	case "https", "ftp":
		p.Errorf("%s:// is not simulated (only http://)", u.Scheme)
		return false
	default:
		p.Errorf("not an http or ftp url: %s", raw)
		return false
	}
	// -T 0 is no timeout: busybox arms alarm(timeout), and alarm(0) arms none.
	ctx, cancel := context.WithCancel(p.Ctx())
	if o.timeout > 0 {
		ctx, cancel = context.WithTimeout(p.Ctx(), o.timeout)
	}
	defer cancel()
	method, body := http.MethodGet, io.Reader(nil)
	if o.postFile != nil {
		data, err := p.ReadFileBounded(p.Abs(*o.postFile))
		if err != nil {
			p.Errorf("can't open '%s': %s", *o.postFile, vfs.Strerror(err))
			return false
		}
		method, body = http.MethodPost, bytes.NewReader(data)
	} else if o.postData != nil {
		method, body = http.MethodPost, strings.NewReader(*o.postData)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		p.Errorf("bad address '%s'", raw)
		return false
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if o.spider {
		req.Method = http.MethodHead
	}
	req.Header.Set("User-Agent", o.userAgent)
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			continue
		}
		req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	// Connecting to HOST (IP:PORT), busybox's first line on stderr.
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if !o.quiet {
		fmt.Fprintf(p.Stderr, "Connecting to %s (%s)\n", u.Host, net.JoinHostPort(u.Hostname(), port))
	}
	client := &http.Client{
		Transport: &http.Transport{
			Proxy: nil, // the host's http_proxy is not the container's
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return wgetDial(p, ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= wgetMaxRedirects {
				return errors.New("too many redirects")
			}
			if r.URL.Scheme != "http" {
				return fmt.Errorf("%s:// is not simulated (only http://)", r.URL.Scheme)
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		wgetError(p, ctx, err, u.Hostname())
		return false
	}
	defer resp.Body.Close()
	if o.serverResponse {
		fmt.Fprintf(p.Stderr, "  %s %s\n", resp.Proto, resp.Status)
		for k, vs := range resp.Header {
			for _, v := range vs {
				fmt.Fprintf(p.Stderr, "  %s: %s\n", k, v)
			}
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		p.Errorf("server returned error: %s %s", resp.Proto, resp.Status)
		return false
	}
	if o.spider {
		if !o.quiet {
			fmt.Fprintln(p.Stderr, "remote file exists")
		}
		return true
	}
	name := o.output
	if name == "" {
		name = u.Path[strings.LastIndexByte(u.Path, '/')+1:]
		if name == "" {
			name = "index.html"
		}
	}
	var w io.Writer = p.Stdout
	if name != "-" {
		f, err := p.OpenWrite(p.Abs(name), false, 0o644)
		if err != nil {
			p.Errorf("can't open '%s': %s", name, vfs.Strerror(err))
			return false
		}
		defer f.Close()
		w = f
		if !o.quiet {
			fmt.Fprintf(p.Stderr, "saving to '%s'\n", name)
		}
	} else if !o.quiet {
		fmt.Fprintln(p.Stderr, "writing to stdout")
	}
	// Streamed: nothing of the body is held, whatever its size.
	if _, err := libbb.Copy(p, w, resp.Body); err != nil {
		if ctx.Err() != nil {
			p.Errorf("download timed out")
		} else {
			p.Errorf("%s", vfs.Strerror(err))
		}
		return false
	}
	if !o.quiet {
		if name == "-" {
			fmt.Fprintln(p.Stderr, " written to stdout")
		} else {
			fmt.Fprintf(p.Stderr, "'%s' saved\n", name)
		}
	}
	return true
}

// wgetDial connects from the container's network namespace, a host name resolved through the
// container's /etc/hosts and resolv.conf (package resolv; no DNS query outside a pod's own
// network namespace).
func wgetDial(p *kernel.Proc, ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := resolv.LookupHost(ctx, p, host)
	if err != nil || len(ips) == 0 {
		return nil, &wgetBadAddress{host}
	}
	return p.Dial(ctx, network, net.JoinHostPort(ips[0].String(), port))
}

type wgetBadAddress struct{ host string }

func (e *wgetBadAddress) Error() string { return "bad address '" + e.host + "'" }

// wgetError words a failed request as busybox does.
func wgetError(p *kernel.Proc, ctx context.Context, err error, host string) {
	var bad *wgetBadAddress
	var errno syscall.Errno
	switch {
	case errors.As(err, &bad):
		p.Errorf("%s", bad.Error())
	case ctx.Err() != nil && p.Ctx().Err() == nil:
		p.Errorf("download timed out")
	case errors.As(err, &errno):
		p.Errorf("can't connect to remote host (%s): %s", host, wgetStrerror(errno))
	default:
		p.Errorf("%v", err)
	}
}

func wgetStrerror(e syscall.Errno) string {
	switch e {
	case syscall.ECONNREFUSED:
		return "Connection refused"
	case syscall.ENETUNREACH:
		return "Network is unreachable"
	case syscall.EHOSTUNREACH:
		return "No route to host"
	case syscall.ETIMEDOUT:
		return "Connection timed out"
	}
	return vfs.Strerror(e)
}
