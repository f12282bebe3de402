// Package agnhost is the program of Kubernetes' e2e agnhost image (test/images/agnhost of
// k8s.io/kubernetes v1.37.2), simulated: the subcommands the [Conformance] specs run, with
// upstream's flags, printed lines, HTTP and UDP behaviour and exit codes, written from upstream's
// code (each file cites the upstream file it follows). Its servers listen in the container's
// network namespace (the kernel's Proc.Listen and Proc.ListenPacket), so they answer on the pod
// IP; its clients dial from there and resolve names through the container's resolv.conf.
//
// Subcommands of upstream's agnhost that are not simulated answer so and exit 1.
package agnhost

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// Version is what `agnhost --version` prints: the image the catalog's agnhost 2.66.1 simulates.
const Version = "2.66.1"

// subcommand is one agnhost subcommand: cobra's Use, Short and Args rule, its flags, and what
// it runs once they are parsed.
type subcommand struct {
	short string
	// maxArgs is cobra.MaximumNArgs (-1: any).
	maxArgs int
	// setup registers the flags on fs and returns the program, which runs with the positional
	// arguments left.
	setup func(p *kernel.Proc, fs *pflag.FlagSet) func(args []string) int
}

// subcommands are the simulated ones, by name (agnhost.go:69-104 lists upstream's).
var subcommands = map[string]subcommand{
	"crd-conversion-webhook":                {"Starts HTTP server on port 443 for testing CustomResourceConversionWebhook", 0, crdConversionWebhook},
	"dns-server-list":                       {"Prints the host's DNS Server list", 0, dnsServerList},
	"dns-suffix":                            {"Prints the host's DNS suffix list", 0, dnsSuffix},
	"entrypoint-tester":                     {"Prints the args it's passed and exits", -1, entrypointTester},
	"etc-hosts":                             {"Prints the host's /etc/hosts file", 0, etcHosts},
	"grpc-health-checking":                  {"Starts a simple grpc health checking endpoint", 0, grpcHealthChecking},
	"guestbook":                             {"Creates a HTTP server with various endpoints representing a guestbook app", 0, guestbook},
	"liveness":                              {"Starts a server that is alive for 10 seconds", 0, liveness},
	"logs-generator":                        {"Outputs lines of logs to stdout uniformly", 0, logsGenerator},
	"mounttest":                             {"Creates files with given permissions and outputs FS type, owner, mode, permissions, contents of files", 0, mounttest},
	"mtlsclient":                            {"Client is configured to build mTLS with server", 0, mtlsClient},
	"mtlsserver":                            {"Server is configured to build mTLS with client and echo client's spiffe identity", 0, mtlsServer},
	"netexec":                               {"Creates HTTP(S), UDP, and (optionally) SCTP servers with various endpoints", 0, netexec},
	"nettest":                               {"Starts a tiny web server for checking networking connectivity", 0, nettest},
	"pause":                                 {"Pauses the execution", 0, pause},
	"porter":                                {"Serves requested data on ports specified in ENV variables", 0, porter},
	"serve-hostname":                        {"Serves the hostname", 0, serveHostname},
	"test-service-account-issuer-discovery": {"Tests the ServiceAccountIssuerDiscovery feature", 0, issuerDiscovery},
	"test-webserver":                        {"Starts a simple HTTP fileserver", 0, testWebserver},
	"webhook":                               {"Starts a HTTP server, useful for testing MutatingAdmissionWebhook and ValidatingAdmissionWebhook", 0, webhook},
}

// notSimulated are upstream's other subcommands: no [Conformance] spec runs them.
var notSimulated = []string{"audit-proxy", "connect", "external-metrics-server", "fake-gitserver", "fake-registry-server",
	"h2c-server", "inclusterclient", "net", "no-snat-test", "no-snat-test-proxy", "nonewprivs", "pod-certificate-signer",
	"port-forward-tester", "resource-consumer-controller", "stress", "tcp-reset"}

// Main is agnhost's entry point: `agnhost SUBCOMMAND [flags]`, with cobra's behaviour for what
// is not a subcommand (help, --version, unknown commands).
func Main(p *kernel.Proc) int {
	args := p.Args[1:]
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(p.Stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-v" {
		fmt.Fprintf(p.Stdout, "app version %s\n", Version)
		return 0
	}
	name := args[0]
	sc, ok := subcommands[name]
	if !ok {
		for _, n := range notSimulated {
			if n == name {
				fmt.Fprintf(p.Stderr, "agnhost %s: not simulated by plugsim (no conformance spec runs it)\n", name)
				return 1
			}
		}
		fmt.Fprintf(p.Stderr, "Error: unknown command %q for \"app\"\nRun 'app --help' for usage.\n", name)
		return 1
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := sc.setup(p, fs)
	// component-base's cli.Run adds klog's flags to every command: the specs pass some. pflag's
	// AddGoFlag gives a one-letter Go flag its shorthand, so klog's v is also -v: the webhook and
	// CRD conversion Deployments of the specs pass "-v=4" (test/e2e/apimachinery/webhook.go).
	fs.IntP("v", "v", 0, "number for the log level verbosity")
	fs.String("vmodule", "", "comma-separated list of pattern=N settings for file-filtered logging")
	help := fs.BoolP("help", "h", false, "help for "+name)
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintf(p.Stderr, "Error: %v\n", err)
		commandUsage(p.Stderr, name, fs)
		return 1
	}
	if *help {
		fmt.Fprintf(p.Stdout, "%s\n\n", sc.short)
		commandUsage(p.Stdout, name, fs)
		return 0
	}
	if sc.maxArgs >= 0 && fs.NArg() > sc.maxArgs {
		fmt.Fprintf(p.Stderr, "Error: accepts at most %d arg(s), received %d\n", sc.maxArgs, fs.NArg())
		commandUsage(p.Stderr, name, fs)
		return 1
	}
	return run(fs.Args())
}

func usage(w io.Writer) {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("Usage:\n  app [command]\n\nAvailable Commands (simulated by plugsim):\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-38s %s\n", n, subcommands[n].short)
	}
	b.WriteString("\nFlags:\n  -h, --help      help for app\n  -v, --version   version for app\n\nUse \"app [command] --help\" for more information about a command.\n")
	io.WriteString(w, b.String())
}

func commandUsage(w io.Writer, name string, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage:\n  app %s [flags]\n\nFlags:\n%s", name, fs.FlagUsages())
}
