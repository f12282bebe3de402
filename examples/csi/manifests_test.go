// Package csi_test keeps the CSI example manifests valid: every document of every YAML file here
// must decode strictly (no unknown fields) into its k8s.io/api type, and the objects must agree
// with each other and with csi-fake (driver name, sidecar versions, flags, mutable parameters).
package csi_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	"github.com/plugsim/plugsim/harness/faults"
)

const driverName = "csi.plugsim.dev"

// newObject returns the typed object for an apiVersion and kind.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "storage.k8s.io/v1/CSIDriver":
		return &storagev1.CSIDriver{}, true
	case "storage.k8s.io/v1/StorageClass":
		return &storagev1.StorageClass{}, true
	case "storage.k8s.io/v1/VolumeAttributesClass":
		return &storagev1.VolumeAttributesClass{}, true
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "v1/Pod":
		return &corev1.Pod{}, true
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		return &rbacv1.ClusterRole{}, true
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, true
	}
	return nil, false
}

// load decodes every manifest of the directory, failing on anything that is not a known type.
func load(t *testing.T) map[string][]any {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string][]any{}
	for _, f := range files {
		if f == "sanity-mutable-parameters.yaml" || f == "faults.yaml" {
			continue // csi-sanity and csi-fake input, not Kubernetes objects
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			obj, ok := newObject(meta.APIVersion, meta.Kind)
			if !ok {
				t.Fatalf("%s document %d: unexpected %s %s (add it to newObject)", f, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, meta.Kind, err)
			}
			out[meta.Kind] = append(out[meta.Kind], obj)
		}
	}
	return out
}

func one[T any](t *testing.T, objs map[string][]any, kind string) T {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("want one %s, have %d", kind, len(objs[kind]))
	}
	return objs[kind][0].(T)
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func TestManifests(t *testing.T) {
	objs := load(t)

	drv := one[*storagev1.CSIDriver](t, objs, "CSIDriver")
	if drv.Name != driverName || drv.Spec.AttachRequired == nil || !*drv.Spec.AttachRequired ||
		drv.Spec.PodInfoOnMount == nil || !*drv.Spec.PodInfoOnMount || drv.Spec.StorageCapacity == nil || !*drv.Spec.StorageCapacity {
		t.Errorf("CSIDriver %s: attachRequired, podInfoOnMount and storageCapacity must be on: %+v", drv.Name, drv.Spec)
	}
	if !slices.Contains(drv.Spec.VolumeLifecycleModes, storagev1.VolumeLifecyclePersistent) ||
		!slices.Contains(drv.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral) {
		t.Errorf("CSIDriver volumeLifecycleModes %v: want Persistent and Ephemeral", drv.Spec.VolumeLifecycleModes)
	}
	sc := one[*storagev1.StorageClass](t, objs, "StorageClass")
	if sc.Provisioner != driverName {
		t.Errorf("StorageClass provisioner %q, want %q", sc.Provisioner, driverName)
	}
	vac := one[*storagev1.VolumeAttributesClass](t, objs, "VolumeAttributesClass")
	if vac.DriverName != driverName {
		t.Errorf("VolumeAttributesClass driverName %q", vac.DriverName)
	}
	// The VolumeAttributesClass and csi-sanity's file use the same keys csi-fake accepts.
	var sanity map[string]string
	data, err := os.ReadFile("sanity-mutable-parameters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &sanity); err != nil {
		t.Fatalf("sanity-mutable-parameters.yaml: %v", err)
	}
	if fmt.Sprint(keys(sanity)) != fmt.Sprint(keys(vac.Parameters)) {
		t.Errorf("mutable parameter keys: csi-sanity file %v, VolumeAttributesClass %v", keys(sanity), keys(vac.Parameters))
	}

	ctrl := one[*appsv1.Deployment](t, objs, "Deployment")
	spec := ctrl.Spec.Template.Spec
	for name, image := range map[string]string{
		"csi-provisioner": "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0",
		"csi-attacher":    "registry.k8s.io/sig-storage/csi-attacher:v4.13.0",
	} {
		if c := container(t, spec, name); c.Image != image {
			t.Errorf("%s image %q, want %q", name, c.Image, image)
		}
	}
	if !slices.Contains(container(t, spec, "csi-fake").Args, "--mode=controller") {
		t.Errorf("controller csi-fake args %v lack --mode=controller", container(t, spec, "csi-fake").Args)
	}
	if spec.ServiceAccountName == "" {
		t.Error("controller Deployment has no service account for the sidecars")
	}
	if ctrl.Spec.Selector == nil || !matches(ctrl.Spec.Selector.MatchLabels, ctrl.Spec.Template.Labels) {
		t.Error("controller Deployment selector does not match its template")
	}

	ds := one[*appsv1.DaemonSet](t, objs, "DaemonSet")
	node := container(t, ds.Spec.Template.Spec, "csi-fake")
	for _, want := range []string{"--mode=node", "--register", "--kubelet-registration-path=/var/lib/kubelet/plugins/" + driverName + "/csi.sock"} {
		if !slices.Contains(node.Args, want) {
			t.Errorf("node csi-fake args %v lack %s", node.Args, want)
		}
	}
	if ds.Spec.Selector == nil || !matches(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Error("node DaemonSet selector does not match its template")
	}
	var hostPaths []string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	for _, want := range []string{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins/" + driverName, "/var/lib/kubelet/pods"} {
		if !slices.Contains(hostPaths, want) {
			t.Errorf("node DaemonSet mounts %v, lacks %s", hostPaths, want)
		}
	}

	// Every csi-fake flag used in a manifest is one csi-fake has (read from its --help source).
	flags := csiFakeFlags(t)
	for _, c := range []corev1.Container{container(t, spec, "csi-fake"), node} {
		for _, a := range c.Args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !flags[name] {
				t.Errorf("container %s uses --%s, which csi-fake does not have", c.Name, name)
			}
		}
	}

	pvc := one[*corev1.PersistentVolumeClaim](t, objs, "PersistentVolumeClaim")
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != sc.Name ||
		pvc.Spec.VolumeAttributesClassName == nil || *pvc.Spec.VolumeAttributesClassName != vac.Name {
		t.Errorf("PVC does not use the example StorageClass and VolumeAttributesClass")
	}
	var inline bool
	for _, p := range objs["Pod"] {
		for _, v := range p.(*corev1.Pod).Spec.Volumes {
			inline = inline || (v.CSI != nil && v.CSI.Driver == driverName)
		}
	}
	if !inline {
		t.Error("no pod uses an inline csi.plugsim.dev volume")
	}
}

// TestFaultsExample: the example fault rules load the way csi-fake --faults loads them.
func TestFaultsExample(t *testing.T) {
	set, err := faults.Load("faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(set.Rules()); n != 3 {
		t.Fatalf("%d rules loaded, want 3", n)
	}
	f, ok := set.Check("/csi.v1.Controller/CreateVolume", func(p string) (string, bool) { return "pvc-123", p == "name" })
	if !ok || f.Code != "ResourceExhausted" {
		t.Errorf("CreateVolume of pvc-123: fault %+v, %v", f, ok)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// csiFakeFlags reads the flag names csi-fake defines from its main.go, so the test needs no
// binary: fs.String("name", ...), fs.StringVar(&x, "name", ...) and the like.
func csiFakeFlags(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "csi-fake", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		i := strings.Index(line, "fs.")
		if i < 0 {
			continue
		}
		rest := line[i:]
		q := strings.Index(rest, `"`)
		if q < 0 || !strings.Contains(rest[:q], "(") {
			continue
		}
		if e := strings.Index(rest[q+1:], `"`); e > 0 {
			flags[rest[q+1:q+1+e]] = true
		}
	}
	if !flags["mode"] || !flags["endpoint"] {
		t.Fatalf("could not read csi-fake's flags from main.go (found %v)", flags)
	}
	return flags
}
