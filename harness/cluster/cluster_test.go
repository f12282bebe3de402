package cluster

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The API server's serving certificate verifies for every name and address a client reaches it by, and
// for no other; a client certificate carries its user and groups and is good for client auth only.
func TestCertificates(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	srv, err := ca.issue(certSpec{cn: "kube-apiserver", server: true, dns: []string{"kubernetes.default.svc"}, ips: ips("127.0.0.1", cpAddr, serviceIP)})
	if err != nil {
		t.Fatal(err)
	}
	sc := parseCert(t, srv.cert)
	for _, host := range []string{"127.0.0.1", cpAddr, serviceIP, "kubernetes.default.svc"} {
		if _, err := sc.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving cert for %s: %v", host, err)
		}
	}
	if _, err := sc.Verify(x509.VerifyOptions{DNSName: "198.18.0.11", Roots: roots}); err == nil {
		t.Error("the API server's certificate verifies for a node's address")
	}
	cl, err := ca.issue(certSpec{cn: "system:node:node1", groups: []string{"system:nodes"}, client: true})
	if err != nil {
		t.Fatal(err)
	}
	cc := parseCert(t, cl.cert)
	if cc.Subject.CommonName != "system:node:node1" || len(cc.Subject.Organization) != 1 || cc.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v", cc.Subject)
	}
	if _, err := cc.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert: %v", err)
	}
	if _, err := cc.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies for server auth")
	}
	if _, err := tls.X509KeyPair(cl.cert, cl.key); err != nil {
		t.Errorf("key pair: %v", err)
	}

	// The kubeconfig holds the same pair, and names the server given.
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Cert []byte `json:"client-certificate-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(kubeconfig("https://127.0.0.1:1234", ca.pem, "u", cl), &kc); err != nil {
		t.Fatal(err)
	}
	if kc.Clusters[0].Cluster.Server != "https://127.0.0.1:1234" || string(kc.Users[0].User.Cert) != string(cl.cert) {
		t.Errorf("kubeconfig: %+v", kc)
	}
}

func TestAddresses(t *testing.T) {
	_, nodes, _ := net.ParseCIDR(nodeSubnet)
	_, pods, _ := net.ParseCIDR(clusterCIDR)
	_, svc, _ := net.ParseCIDR(serviceCIDR)
	for _, i := range []int{1, 2, MaxNodes} {
		ip := net.ParseIP(nodeIP(i))
		if !nodes.Contains(ip) || pods.Contains(ip) || svc.Contains(ip) || ip.Equal(net.ParseIP(cpAddr)) || ip.To4()[3] == 255 {
			t.Errorf("node %d address %s", i, ip)
		}
	}
	// kube-dns sits where kubeadm puts it (GetDNSIP): the tenth address of the Service CIDR.
	tenth := svc.IP.To4()
	tenth[3] += 10
	if dnsIP != tenth.String() || serviceIP == dnsIP {
		t.Errorf("kube-dns %s, want %s", dnsIP, tenth)
	}
	if nodeIP(1) == nodeIP(2) {
		t.Error("two nodes share an address")
	}
	// Pod CIDRs (/24 each) hold MaxNodes nodes.
	if ones, _ := pods.Mask.Size(); 1<<(nodeMask-ones) < MaxNodes {
		t.Errorf("%s holds %d /%d, fewer than %d nodes", clusterCIDR, 1<<(nodeMask-ones), nodeMask, MaxNodes)
	}
	if PrefixFor("/a") == PrefixFor("/b") || !strings.HasPrefix(PrefixFor("/a"), "plugsim-") {
		t.Errorf("prefixes %s %s", PrefixFor("/a"), PrefixFor("/b"))
	}
}

// A process is the cluster's only with its own start time (a reused pid is not ours) and working in the
// cluster's directory (a pid a state file merely names is not ours either).
func TestProcessOurs(t *testing.T) {
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	if err := (Process{PID: os.Getpid(), Start: start}).ours(cwd); err != nil {
		t.Errorf("this process, in its own directory: %v", err)
	}
	if err := (Process{PID: os.Getpid(), Start: start + 1}).ours(cwd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("another start time: %v, want ErrNotExist", err)
	}
	if err := (Process{PID: os.Getpid(), Start: start}).ours(t.TempDir()); err == nil {
		t.Error("a process working elsewhere counts as the cluster's")
	}
}

// State round-trips through its file, and an absent file reads as os.ErrNotExist (what `down` relies on
// to be a no-op).
func TestState(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadState(dir); !os.IsNotExist(err) {
		t.Fatalf("ReadState of an empty dir: %v", err)
	}
	st := &State{Dir: dir, Prefix: PrefixFor(dir)}
	if err := st.addNetns("x-cp"); err != nil {
		t.Fatal(err)
	}
	if err := st.addProcess(Process{Name: "etcd", PID: 1, Start: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != st.Prefix || len(got.Netns) != 1 || len(got.Procs) != 1 || got.Procs[0].Name != "etcd" {
		t.Errorf("read back %+v", got)
	}
}

// Not a cluster's directory: up refuses to clear it.
func TestPrepareDirRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := prepareDir(dir)
	if err == nil || !strings.Contains(err.Error(), "holds no cluster") {
		t.Fatalf("prepareDir of a user's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("the user's file is gone: %v", err)
	}
}

// The relay carries bytes both ways and passes on a half-close. As root it dials "inside" this
// process's own network namespace, the same setns path it takes into the control-plane namespace.
func TestRelay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setns needs root")
	}
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client's half-close
				c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		Relay(front, "/proc/self/ns/net", backend.Addr().String(), log.New(io.Discard, "", 0))
		close(done)
	}()
	t.Cleanup(func() { front.Close(); <-done })
	c, err := net.DialTimeout("tcp", front.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	got, err := bufio.NewReader(c).ReadString('\n')
	if got != "HELLO" || err != io.EOF {
		t.Errorf("through the relay: %q, %v", got, err)
	}
}
