// Package csi_test keeps the CSI example manifests valid: every document of every YAML file here
// must decode strictly (no unknown fields) into its k8s.io/api type, and the objects must agree
// with each other and with csi-fake (driver name, sidecar versions, flags, mutable parameters).
package csi_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/plugsim/plugsim/harness/faults"
)

const (
	driverName          = "csi.plugsim.dev"
	ephemeralDriverName = "csi.ephemeral.plugsim.dev"
)

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
	case "v1/Namespace":
		return &corev1.Namespace{}, true
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "v1/Pod":
		return &corev1.Pod{}, true
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		return &rbacv1.ClusterRole{}, true
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, true
	case "snapshot.storage.k8s.io/v1/VolumeSnapshotClass":
		return &volumeSnapshotClass{}, true
	}
	return nil, false
}

// volumeSnapshotClass is external-snapshotter v8's snapshot.storage.k8s.io/v1 VolumeSnapshotClass
// (client/apis/volumesnapshot/v1, a CRD, not in k8s.io/api): its every field, so the strict decoding
// refuses a misspelt one as for the other kinds.
type volumeSnapshotClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Driver            string            `json:"driver"`
	Parameters        map[string]string `json:"parameters,omitempty"`
	DeletionPolicy    string            `json:"deletionPolicy"`
}

func (c *volumeSnapshotClass) GetName() string { return c.Name }

// load decodes every manifest of the directory, failing on anything that is not a known type.
func load(t *testing.T) map[string][]any {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string][]any{}
	// The manifests are applied together (kubectl apply -f examples/csi/): two objects of one kind
	// and name would overwrite each other.
	seen := map[string]string{}
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
			if named, ok := obj.(interface{ GetName() string }); ok {
				key := meta.Kind + "/" + named.GetName()
				if prev, dup := seen[key]; dup {
					t.Errorf("%s is in both %s and %s", key, prev, f)
				}
				seen[key] = f
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

// byName returns the object of a kind with a name.
func byName[T interface{ GetName() string }](t *testing.T, objs map[string][]any, kind, name string) T {
	t.Helper()
	for _, o := range objs[kind] {
		if v := o.(T); v.GetName() == name {
			return v
		}
	}
	t.Fatalf("no %s %q", kind, name)
	var zero T
	return zero
}

func TestManifests(t *testing.T) {
	objs := load(t)

	drivers := map[string]*storagev1.CSIDriver{}
	for _, o := range objs["CSIDriver"] {
		drivers[o.(*storagev1.CSIDriver).Name] = o.(*storagev1.CSIDriver)
	}
	if len(drivers) != 2 {
		t.Errorf("CSIDrivers %v: want %s and %s", keysOf(drivers), driverName, ephemeralDriverName)
	}
	drv := byName[*storagev1.CSIDriver](t, objs, "CSIDriver", driverName)
	if drv.Spec.AttachRequired == nil || !*drv.Spec.AttachRequired ||
		drv.Spec.PodInfoOnMount == nil || !*drv.Spec.PodInfoOnMount || drv.Spec.StorageCapacity == nil || !*drv.Spec.StorageCapacity {
		t.Errorf("CSIDriver %s: attachRequired, podInfoOnMount and storageCapacity must be on: %+v", drv.Name, drv.Spec)
	}
	if !slices.Contains(drv.Spec.VolumeLifecycleModes, storagev1.VolumeLifecyclePersistent) ||
		!slices.Contains(drv.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral) {
		t.Errorf("CSIDriver volumeLifecycleModes %v: want Persistent and Ephemeral", drv.Spec.VolumeLifecycleModes)
	}
	// The ephemeral-only driver (csi.tigera.io's shape): nothing to attach, Ephemeral alone.
	eph := byName[*storagev1.CSIDriver](t, objs, "CSIDriver", ephemeralDriverName)
	if eph.Spec.AttachRequired == nil || *eph.Spec.AttachRequired || !slices.Equal(eph.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}) {
		t.Errorf("CSIDriver %s: want attachRequired false and modes [Ephemeral], have %+v", eph.Name, eph.Spec)
	}

	// One default class, provisioned by the driver; the mismatch class's provisioner is no
	// driver's name.
	var defaults []string
	for _, o := range objs["StorageClass"] {
		c := o.(*storagev1.StorageClass)
		if c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			defaults = append(defaults, c.Name)
		}
	}
	if len(defaults) != 1 {
		t.Fatalf("default StorageClasses %v, want one", defaults)
	}
	sc := byName[*storagev1.StorageClass](t, objs, "StorageClass", defaults[0])
	if sc.Provisioner != driverName {
		t.Errorf("default StorageClass provisioner %q, want %q", sc.Provisioner, driverName)
	}
	if m := byName[*storagev1.StorageClass](t, objs, "StorageClass", "example"); drivers[m.Provisioner] != nil {
		t.Errorf("StorageClass example's provisioner %q is a driver's name; it must match none", m.Provisioner)
	}
	// The VolumeSnapshotClass is the default one, of the driver, with a policy the CRD allows.
	vsc := one[*volumeSnapshotClass](t, objs, "VolumeSnapshotClass")
	if vsc.Driver != driverName || vsc.Annotations["snapshot.storage.kubernetes.io/is-default-class"] != "true" ||
		vsc.DeletionPolicy != "Delete" && vsc.DeletionPolicy != "Retain" {
		t.Errorf("VolumeSnapshotClass %s: driver %q, default %q, deletionPolicy %q; want %s, the default, Delete or Retain",
			vsc.Name, vsc.Driver, vsc.Annotations["snapshot.storage.kubernetes.io/is-default-class"], vsc.DeletionPolicy, driverName)
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
	if fmt.Sprint(keysOf(sanity)) != fmt.Sprint(keysOf(vac.Parameters)) {
		t.Errorf("mutable parameter keys: csi-sanity file %v, VolumeAttributesClass %v", keysOf(sanity), keysOf(vac.Parameters))
	}

	// The controller pod: csi-fake --mode=controller and the four sidecars, images as the sidecars'
	// module pins them (cri-fake's catalog names the same tags), with the service account the
	// sidecars' ClusterRoles are bound to.
	versions := pinnedVersions(t, filepath.Join("..", "..", "harness", "tools", "sidecars", "go.mod"))
	image := func(bin, module string) string {
		return "registry.k8s.io/sig-storage/" + bin + ":" + versions[module]
	}
	ctrl := byName[*appsv1.Deployment](t, objs, "Deployment", "csi-fake-controller")
	spec := ctrl.Spec.Template.Spec
	for _, sc := range sidecarRBAC[:4] {
		if c := container(t, spec, sc.bin); c.Image != image(sc.bin, sc.module) || !slices.Contains(c.Args, "--csi-address=/csi/csi.sock") {
			t.Errorf("%s: image %q args %v, want %s against /csi/csi.sock", sc.bin, c.Image, c.Args, image(sc.bin, sc.module))
		}
	}
	if !slices.Contains(container(t, spec, "csi-fake").Args, "--mode=controller") {
		t.Errorf("controller csi-fake args %v lack --mode=controller", container(t, spec, "csi-fake").Args)
	}
	if spec.ServiceAccountName != "csi-fake-controller" {
		t.Errorf("controller Deployment's service account %q, want csi-fake-controller (the sidecars' bindings name it)", spec.ServiceAccountName)
	}
	if ctrl.Spec.Selector == nil || !matches(ctrl.Spec.Selector.MatchLabels, ctrl.Spec.Template.Labels) {
		t.Error("controller Deployment selector does not match its template")
	}
	snap := byName[*appsv1.Deployment](t, objs, "Deployment", "snapshot-controller")
	if c := container(t, snap.Spec.Template.Spec, "snapshot-controller"); c.Image != image("snapshot-controller", sidecarRBAC[4].module) {
		t.Errorf("snapshot-controller image %q", c.Image)
	}
	// Every pod of the driver is in its own namespace, which controller.yaml makes.
	ns := one[*corev1.Namespace](t, objs, "Namespace").Name
	for _, o := range objs["Deployment"] {
		if d := o.(*appsv1.Deployment); d.Namespace != ns {
			t.Errorf("Deployment %s in namespace %q, want %s", d.Name, d.Namespace, ns)
		}
	}

	// The node plugins: one DaemonSet per driver, registering themselves (no node-driver-registrar)
	// with the socket path the kubelet sees, on the kubelet's own directories.
	flags := csiFakeFlags(t)
	for _, tc := range []struct {
		ds, driver    string
		bidirectional bool
	}{{"csi-fake-node", driverName, true}, {"csi-fake-ephemeral-node", ephemeralDriverName, false}} {
		ds := byName[*appsv1.DaemonSet](t, objs, "DaemonSet", tc.ds)
		if ds.Namespace != ns {
			t.Errorf("DaemonSet %s in namespace %q, want %s", ds.Name, ds.Namespace, ns)
		}
		node := container(t, ds.Spec.Template.Spec, "csi-fake")
		sock := "/var/lib/kubelet/plugins/" + tc.driver + "/csi.sock"
		for _, want := range []string{"--endpoint=unix://" + sock, "--register", "--plugin-registry-dir=/var/lib/kubelet/plugins_registry", "--kubelet-registration-path=" + sock} {
			if !slices.Contains(node.Args, want) {
				t.Errorf("%s: csi-fake args %v lack %s", ds.Name, node.Args, want)
			}
		}
		if tc.driver != driverName && !slices.Contains(node.Args, "--driver-name="+tc.driver) {
			t.Errorf("%s: csi-fake args %v lack --driver-name=%s", ds.Name, node.Args, tc.driver)
		}
		if ds.Spec.Selector == nil || !matches(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
			t.Errorf("%s: selector does not match its template", ds.Name)
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range node.VolumeMounts {
			mounts[m.MountPath] = m
		}
		paths := map[string]string{}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.HostPath != nil {
				paths[v.Name] = v.HostPath.Path
			}
		}
		// The kubelet's directories at the paths the kubelet gives (its target paths must name the
		// same directories inside the container).
		for _, dir := range []string{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/lib/kubelet/pods"} {
			m, ok := mounts[dir]
			if !ok || paths[m.Name] != dir {
				t.Errorf("%s: %s is not the host's %s (mounts %v, volumes %v)", ds.Name, dir, dir, mounts, paths)
			}
		}
		pods := mounts["/var/lib/kubelet/pods"]
		bidi := pods.MountPropagation != nil && *pods.MountPropagation == corev1.MountPropagationBidirectional
		privileged := node.SecurityContext != nil && node.SecurityContext.Privileged != nil && *node.SecurityContext.Privileged
		if bidi != tc.bidirectional || privileged != tc.bidirectional {
			t.Errorf("%s: pods directory Bidirectional %v, privileged %v; want both %v (bind publishes need them, fake ones do not)", ds.Name, bidi, privileged, tc.bidirectional)
		}
		for _, a := range node.Args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !flags[name] {
				t.Errorf("%s uses --%s, which csi-fake does not have", ds.Name, name)
			}
		}
	}
	for _, a := range container(t, spec, "csi-fake").Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !flags[name] {
			t.Errorf("the controller uses --%s, which csi-fake does not have", name)
		}
	}

	pvc := byName[*corev1.PersistentVolumeClaim](t, objs, "PersistentVolumeClaim", "data")
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != sc.Name ||
		pvc.Spec.VolumeAttributesClassName == nil || *pvc.Spec.VolumeAttributesClassName != vac.Name {
		t.Errorf("PVC data does not use the default StorageClass and the VolumeAttributesClass")
	}
	if stuck := byName[*corev1.PersistentVolumeClaim](t, objs, "PersistentVolumeClaim", "stuck"); stuck.Spec.StorageClassName == nil || *stuck.Spec.StorageClassName != "example" {
		t.Errorf("PVC stuck does not use the mismatched StorageClass example")
	}
	// Every claim's class exists; every inline volume's driver exists and allows Ephemeral.
	for _, o := range objs["PersistentVolumeClaim"] {
		c := o.(*corev1.PersistentVolumeClaim)
		if c.Spec.StorageClassName != nil {
			byName[*storagev1.StorageClass](t, objs, "StorageClass", *c.Spec.StorageClassName)
		}
	}
	inline := map[string]bool{}
	var claimed bool
	for _, p := range objs["Pod"] {
		for _, v := range p.(*corev1.Pod).Spec.Volumes {
			if v.CSI != nil {
				inline[v.CSI.Driver] = true
				if d := drivers[v.CSI.Driver]; d == nil || !slices.Contains(d.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral) {
					t.Errorf("pod %s: inline volume of %s, which has no CSIDriver allowing Ephemeral", p.(*corev1.Pod).Name, v.CSI.Driver)
				}
			}
			claimed = claimed || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name)
		}
	}
	if !inline[driverName] || !inline[ephemeralDriverName] || !claimed {
		t.Errorf("pods use inline volumes of %v and PVC data: %v; want inline volumes of both drivers and a pod on the PVC", keysOf(inline), claimed)
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

func keysOf[V any](m map[string]V) []string {
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

// sidecarRBAC names, for each sidecar binary, its module in harness/tools/sidecars/go.mod and the
// upstream manifest whose ClusterRoles sidecars-rbac.yaml follows.
var sidecarRBAC = []struct{ bin, module, file string }{
	{"csi-provisioner", "github.com/kubernetes-csi/external-provisioner/v6", "deploy/kubernetes/rbac.yaml"},
	{"csi-attacher", "github.com/kubernetes-csi/external-attacher/v4", "deploy/kubernetes/rbac.yaml"},
	{"csi-resizer", "github.com/kubernetes-csi/external-resizer/v2", "deploy/kubernetes/rbac.yaml"},
	{"csi-snapshotter", "github.com/kubernetes-csi/external-snapshotter/v8", "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml"},
	{"snapshot-controller", "github.com/kubernetes-csi/external-snapshotter/v8", "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml"},
}

// TestSidecarRBACCoversUpstream: every rule of every ClusterRole in a sidecar's own manifest, at
// the version harness/tools/sidecars pins, is granted by that sidecar's ClusterRole here, and each
// ClusterRole is bound to the service account of the pod the sidecar runs in. The upstream files are read from
// the module cache, where `make sidecars` put them.
func TestSidecarRBACCoversUpstream(t *testing.T) {
	objs := load(t)
	versions := pinnedVersions(t, filepath.Join("..", "..", "harness", "tools", "sidecars", "go.mod"))
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	for _, sc := range sidecarRBAC {
		t.Run(sc.bin, func(t *testing.T) {
			role := byName[*rbacv1.ClusterRole](t, objs, "ClusterRole", "plugsim:"+sc.bin)
			b := byName[*rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "plugsim:"+sc.bin)
			// Bound to the service account of the pod the sidecar runs in (controller.yaml).
			account := "csi-fake-controller"
			if sc.bin == "snapshot-controller" {
				account = "snapshot-controller"
			}
			d := byName[*appsv1.Deployment](t, objs, "Deployment", account)
			if d.Spec.Template.Spec.ServiceAccountName != account {
				t.Fatalf("Deployment %s runs as %q", d.Name, d.Spec.Template.Spec.ServiceAccountName)
			}
			container(t, d.Spec.Template.Spec, sc.bin)
			if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != account || b.Subjects[0].Namespace != d.Namespace {
				t.Errorf("binding %s: %+v, want ClusterRole %s for service account %s/%s", b.Name, b, role.Name, d.Namespace, account)
			}
			v := versions[sc.module]
			if v == "" {
				t.Fatalf("%s is not pinned in harness/tools/sidecars/go.mod", sc.module)
			}
			path := filepath.Join(cache, sc.module+"@"+v, sc.file)
			data, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				t.Skipf("%s not in the module cache (make sidecars downloads it)", path)
			}
			if err != nil {
				t.Fatal(err)
			}
			upstream := 0
			for _, doc := range strings.Split(string(data), "\n---") {
				var cr rbacv1.ClusterRole
				if err := yaml.Unmarshal([]byte(doc), &cr); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if cr.Kind != "ClusterRole" {
					continue
				}
				upstream++
				for _, r := range cr.Rules {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							for _, verb := range r.Verbs {
								if !grants(role.Rules, g, res, verb) {
									t.Errorf("%s grants %s %q/%s (%s, ClusterRole %s); %s does not", sc.file, verb, g, res, sc.module+"@"+v, cr.Name, role.Name)
								}
							}
						}
					}
				}
			}
			if upstream == 0 {
				t.Fatalf("%s holds no ClusterRole", path)
			}
		})
	}
}

func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// pinnedVersions reads the require lines of a go.mod: module path -> version.
func pinnedVersions(t *testing.T, gomod string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && strings.HasPrefix(f[1], "v") && !strings.Contains(line, "=>") {
			out[f[0]] = f[1]
		}
	}
	return out
}
