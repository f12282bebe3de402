package cluster

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestCorednsManifest: kubeadm's add-on rendered for this cluster: one of each object, kube-dns at
// dnsIP, the Deployment's replicas and image, and the Corefile serving dnsDomain.
func TestCorednsManifest(t *testing.T) {
	kinds := map[string]int{}
	for _, doc := range strings.Split(string(corednsManifest()), "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		kinds[meta.Kind]++
		var err error
		switch meta.Kind {
		case "Service":
			var s corev1.Service
			if err = yaml.UnmarshalStrict([]byte(doc), &s); err == nil && (s.Name != "kube-dns" || s.Spec.ClusterIP != dnsIP) {
				t.Errorf("Service %s at %s, want kube-dns at %s", s.Name, s.Spec.ClusterIP, dnsIP)
			}
		case "Deployment":
			var d appsv1.Deployment
			if err = yaml.UnmarshalStrict([]byte(doc), &d); err == nil &&
				(d.Spec.Replicas == nil || *d.Spec.Replicas != dnsReplicas || d.Spec.Template.Spec.Containers[0].Image != corednsImage) {
				t.Errorf("Deployment %s: replicas %v, image %s", d.Name, d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err = yaml.UnmarshalStrict([]byte(doc), &cm); err == nil && !strings.Contains(cm.Data["Corefile"], "kubernetes "+dnsDomain+" in-addr.arpa ip6.arpa {") {
				t.Errorf("the Corefile does not serve %s:\n%s", dnsDomain, cm.Data["Corefile"])
			}
		}
		if err != nil {
			t.Errorf("%s: %v", meta.Kind, err)
		}
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service"} {
		if kinds[k] != 1 {
			t.Errorf("%d %s(s) in the manifest, want 1 (%v)", kinds[k], k, kinds)
		}
	}
}
