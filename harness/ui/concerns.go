package ui

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/plugsim/plugsim/harness/trace"
)

// Concerns says which pod, sandbox, container and volume a call was about, as far as its request,
// its answer and the calls before it tell: what the page filters on and follows a pod by.
type Concerns struct {
	// Pod is "namespace/name".
	Pod       string `json:"pod,omitempty"`
	Sandbox   string `json:"sandbox,omitempty"`
	Container string `json:"container,omitempty"`
	Volume    string `json:"volume,omitempty"`
}

// maxIndexed bounds each map of the index: past it the index starts afresh, so a long run (or
// hostile IDs) cannot grow it without end; calls of pods started before then are still found by
// what their own request names.
const maxIndexed = 50000

// podIndex remembers what earlier calls said: which pod a sandbox is (RunPodSandbox's request and
// answer), which sandbox a container is in (CreateContainer's), which pod a UID is.
type podIndex struct {
	sandboxPod       map[string]string
	containerSandbox map[string]string
	uidPod           map[string]string
}

func newPodIndex() *podIndex {
	return &podIndex{sandboxPod: map[string]string{}, containerSandbox: map[string]string{}, uidPod: map[string]string{}}
}

func remember(m map[string]string, k, v string) {
	if k == "" || v == "" {
		return
	}
	if len(m) >= maxIndexed {
		clear(m)
	}
	m[k] = v
}

// callFields are the request and answer fields the index reads; protojson names (lowerCamel).
type callFields struct {
	PodSandboxID string `json:"podSandboxId"`
	ContainerID  string `json:"containerId"`
	VolumeID     string `json:"volumeId"`
	TargetPath   string `json:"targetPath"`
	Config       *struct {
		Metadata *podMeta `json:"metadata"`
	} `json:"config"`
	SandboxConfig *struct {
		Metadata *podMeta `json:"metadata"`
	} `json:"sandboxConfig"`
	Volume *struct {
		VolumeID string `json:"volumeId"`
	} `json:"volume"`
	VolumeContext map[string]string `json:"volumeContext"`
	Args          map[string]string `json:"args"` // CNI_ARGS as cri-fake records them
}

type podMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

func (m *podMeta) pod() string {
	if m == nil || m.Name == "" {
		return ""
	}
	return m.Namespace + "/" + m.Name
}

// kubeletPodDir finds the pod UID in a kubelet volume path: ROOT/pods/UID/volumes/... (the
// kubelet's getPodVolumeDir).
var kubeletPodDir = regexp.MustCompile(`/pods/([^/]+)/volumes/`)

func decodeFields(raw json.RawMessage) callFields {
	var f callFields
	if len(raw) > 0 && raw[0] == '{' {
		json.Unmarshal(raw, &f) // a field of another shape stays empty
	}
	return f
}

// concerns works out what ev was about and remembers what later calls will need.
func (x *podIndex) concerns(ev trace.Event) Concerns {
	req, resp := decodeFields(ev.Request), decodeFields(ev.Response)
	var c Concerns
	switch ev.Interface {
	case trace.CRI:
		c.Sandbox = first(req.PodSandboxID, resp.PodSandboxID)
		c.Container = first(req.ContainerID, resp.ContainerID)
		var meta *podMeta
		if req.Config != nil && ev.Method == "RunPodSandbox" {
			meta = req.Config.Metadata
		} else if req.SandboxConfig != nil {
			meta = req.SandboxConfig.Metadata
		}
		if p := meta.pod(); p != "" {
			c.Pod = p
			remember(x.uidPod, meta.UID, p)
			remember(x.sandboxPod, c.Sandbox, p)
		}
		if ev.Method == "CreateContainer" && ev.Code == "OK" {
			remember(x.containerSandbox, resp.ContainerID, req.PodSandboxID)
		}
		if c.Sandbox == "" && c.Container != "" {
			c.Sandbox = x.containerSandbox[c.Container]
		}
	case trace.CNI:
		c.Sandbox = ev.Attrs["containerID"]
		c.Pod = ev.Attrs["pod"]
		if c.Pod == "" && req.Args["K8S_POD_NAME"] != "" {
			c.Pod = req.Args["K8S_POD_NAMESPACE"] + "/" + req.Args["K8S_POD_NAME"]
		}
		remember(x.sandboxPod, c.Sandbox, c.Pod)
	case trace.OCI:
		// A runc call names the container (cri-fake/oci); its sandbox and pod are what the CRI
		// calls before it said.
		c.Container = ev.Attrs["containerID"]
		c.Sandbox = x.containerSandbox[c.Container]
	case trace.CSI:
		c.Volume = req.VolumeID
		if c.Volume == "" && resp.Volume != nil {
			c.Volume = resp.Volume.VolumeID
		}
		// csi.storage.k8s.io/pod.* when the CSIDriver asks for podInfoOnMount; else the UID in
		// the kubelet's target path.
		if n := req.VolumeContext["csi.storage.k8s.io/pod.name"]; n != "" {
			c.Pod = req.VolumeContext["csi.storage.k8s.io/pod.namespace"] + "/" + n
		} else if m := kubeletPodDir.FindStringSubmatch(req.TargetPath); m != nil {
			c.Pod = x.uidPod[m[1]]
		}
	}
	if c.Pod == "" && c.Sandbox != "" {
		c.Pod = x.sandboxPod[c.Sandbox]
	}
	return c
}

func first(s ...string) string {
	for _, v := range s {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
