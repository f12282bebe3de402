package cluster

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// clusterDNS applies what kubeadm's CoreDNS add-on applies (k8s.io/kubernetes v1.37.2,
// cmd/kubeadm/app/phases/addons/dns/manifests.go): the coredns ConfigMap with kubeadm's default Corefile,
// the coredns ServiceAccount bound to ClusterRole system:coredns, the coredns Deployment of two replicas of
// registry.k8s.io/coredns/coredns:v1.15.0 (a program image: CoreDNS itself, built from its module into
// bin/programs, under the real runc), and the kube-dns Service at dnsIP, the address every kubelet gives
// its pods as their nameserver (kubeletConfig's clusterDNS). `up` waits until both replicas are Ready.
//
// The Corefile forwards what is not the cluster's to /etc/resolv.conf, as kubeadm's does; the CoreDNS
// pods are dnsPolicy Default, so that file is the kubelet's resolvConf, nodeResolvConf: it names the
// control-plane address, where nothing serves port 53, so a name outside cluster.local fails at once
// (the kernel refuses the datagram) instead of waiting on a server no one can reach.
type clusterDNS struct{}

func (clusterDNS) Name() string { return "deploy CoreDNS (kube-dns)" }

const (
	dnsIP          = "198.18.128.10" // the tenth address of serviceCIDR, as kubeadm picks it (GetDNSIP)
	dnsDomain      = "cluster.local"
	corednsImage   = "registry.k8s.io/coredns/coredns:v1.15.0"
	corednsProgram = "programs/coredns" // under BinDir: where cri-fake (--program-dir beside its runc) finds it
	dnsReplicas    = 2
)

// nodeResolvConf is the resolv.conf every kubelet is given (resolvConf): the upstream of dnsPolicy
// Default pods, CoreDNS among them.
func nodeResolvConf() []byte {
	return fmt.Appendf(nil, "# plugsim: no DNS server is reachable from the cluster; nothing serves port 53 here, so a\n# query is refused at once.\nnameserver %s\n", cpAddr)
}

func (clusterDNS) Execute(c *actionContext) error {
	if fi, err := os.Stat(c.bin(corednsProgram)); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("CoreDNS's program %s is not built (make programs): %v", c.bin(corednsProgram), err)
	}
	if err := c.apply("coredns.yaml", corednsManifest()); err != nil {
		return err
	}
	c.step("applied kubeadm's CoreDNS add-on: ConfigMap, RBAC system:coredns, Deployment coredns (%d replicas), Service kube-dns %s", dnsReplicas, dnsIP)

	// The logs to read if it never gets Ready: each CoreDNS container's, and its node's kubelet's.
	var logs []string
	err := c.wait("CoreDNS to be Ready (deployment coredns in kube-system)", func() (bool, string) {
		var d appsv1.Deployment
		if _, err := c.get("/apis/apps/v1/namespaces/kube-system/deployments/coredns", &d); err != nil {
			return false, err.Error()
		}
		var pods corev1.PodList
		if _, err := c.get("/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns", &pods); err != nil {
			return false, err.Error()
		}
		logs = logs[:0]
		var desc []string
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				nd := c.path("nodes", p.Spec.NodeName)
				logs = append(logs,
					filepath.Join(nd, "logs", fmt.Sprintf("kube-system_%s_%s", p.Name, p.UID), "coredns"),
					c.path("logs", p.Spec.NodeName+"-kubelet.log"))
			}
			desc = append(desc, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, podState(&p)))
		}
		ready := d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas == dnsReplicas && d.Status.UpdatedReplicas == dnsReplicas
		return ready, fmt.Sprintf("%d of %d ready; %s", d.Status.ReadyReplicas, dnsReplicas, strings.Join(desc, "; "))
	})
	if err != nil {
		c.logs = append(logs, c.path("manifests", "coredns.yaml"))
		return err
	}
	c.step("CoreDNS v1.15.0 Ready (%d replicas) behind kube-dns %s: pods resolve *.%s", dnsReplicas, dnsIP, dnsDomain)
	return nil
}

// podState is a pod's phase and, for each container not ready, why (waiting reason, last exit).
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf(", %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			s += fmt.Sprintf(", %s terminated: %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		case !cs.Ready:
			s += fmt.Sprintf(", %s running, not ready (restarts %d)", cs.Name, cs.RestartCount)
		}
	}
	return s
}

// corednsManifest is kubeadm's CoreDNS add-on (coredns.yaml), rendered as kubeadm renders it for this
// cluster (DNSDomain cluster.local, DNSIP dnsIP, two replicas, ControlPlaneTaintKey
// node-role.kubernetes.io/control-plane).
func corednsManifest() []byte {
	var b bytes.Buffer
	err := corednsTemplate.Execute(&b, struct {
		DNSDomain, Image, DNSIP string
		Replicas                int
	}{dnsDomain, corednsImage, dnsIP, dnsReplicas})
	if err != nil {
		// The template and its data are this package's own: a failure is a bug here.
		panic(err)
	}
	return b.Bytes()
}

//go:embed coredns.yaml
var corednsYAML string

var corednsTemplate = template.Must(template.New("coredns.yaml").Option("missingkey=error").Parse(corednsYAML))
