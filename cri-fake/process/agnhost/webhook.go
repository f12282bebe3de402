package agnhost

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// maxReviewBytes bounds a review request body (the API server sends a few KiB; etcd's limit on
// an object is 1.5 MiB): past it the request is refused as one that cannot be decoded.
const maxReviewBytes = 3 << 20

// webhook follows webhook/main.go: an HTTPS server on --port (443; the specs pass 8444) with
// --tls-cert-file and --tls-private-key-file, answering AdmissionReview v1 and v1beta1 on the
// paths the specs register (main.go:217-229) with upstream's decisions and JSON patches, and
// /readyz.
func webhook(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	certFile := fs.String("tls-cert-file", "", "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert).")
	keyFile := fs.String("tls-private-key-file", "", "File containing the default x509 private key matching --tls-cert-file.")
	port := fs.Int("port", 443, "Secure port that the webhook listens on")
	sidecar := fs.String("sidecar-image", "", "Image to be used as the injected sidecar")
	return func([]string) int {
		k := newKlog(p)
		cert, err := loadKeyPair(p, *certFile, *keyFile)
		if err != nil {
			k.printf('F', "config.go:37", "%v", err)
			return 255
		}
		srv, err := listenHTTP(p, *port, admissionMux(p, *sidecar), &tls.Config{Certificates: []tls.Certificate{cert}})
		if err != nil {
			return panicExit(p, listenError("tcp", *port, err))
		}
		srv.serve(p)
		return waitEnd(p)
	}
}

// admitFunc decides on one AdmissionReview request (v1 and v1beta1 alike).
type admitFunc func(ar admissionReview) *admissionResponse

// admissionMux is webhook/main.go's routes.
func admissionMux(p *kernel.Proc, sidecarImage string) *http.ServeMux {
	k := newKlog(p)
	mux := http.NewServeMux()
	handle := func(path string, f admitFunc) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { serveAdmission(k, w, r, f) })
	}
	handle("/always-allow-delay-5s", func(admissionReview) *admissionResponse {
		// alwaysallow.go: sleeps 5 s, then allows (the timeout specs rely on the delay).
		sleepCtx(p, 5*time.Second)
		return &admissionResponse{Allowed: true, Result: &apiStatus{Message: "this webhook allows all requests"}}
	})
	handle("/always-deny", func(admissionReview) *admissionResponse {
		return &admissionResponse{Allowed: false, Result: &apiStatus{Message: "this webhook denies all requests"}}
	})
	handle("/add-label", addLabel)
	handle("/pods", func(ar admissionReview) *admissionResponse { return admitPods(p, ar) })
	handle("/pods/attach", denySpecificAttachment)
	handle("/mutating-pods", mutatePods)
	handle("/mutating-pods-sidecar", func(ar admissionReview) *admissionResponse {
		return mutatePodsSidecar(ar, sidecarImage)
	})
	handle("/configmaps", admitConfigMaps)
	handle("/mutating-configmaps", mutateConfigMaps)
	handle("/custom-resource", admitCustomResource)
	handle("/mutating-custom-resource", mutateCustomResource)
	handle("/crd", admitCRD)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	return mux
}

// serveAdmission is webhook/main.go serve: a JSON AdmissionReview in, the same version out with
// the request's UID.
func serveAdmission(k *klog, w http.ResponseWriter, r *http.Request, admit admitFunc) {
	var body []byte
	if r.Body != nil {
		if data, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1)); err == nil && len(data) <= maxReviewBytes {
			body = data
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		// main.go:112: logged, and the request answered with nothing.
		k.printf('E', "main.go:113", "contentType=%s, expect application/json", ct)
		return
	}
	var tm typeMeta
	if err := json.Unmarshal(body, &tm); err != nil || tm.Kind == "" {
		msg := fmt.Sprintf("Request could not be decoded: %v", decodeError(body, err))
		k.printf('E', "main.go:123", "%s", msg)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	var resp any
	switch tm.APIVersion {
	case "admission.k8s.io/v1", "admission.k8s.io/v1beta1":
		if tm.Kind != "AdmissionReview" {
			break
		}
		var req admissionReview
		if err := json.Unmarshal(body, &req); err != nil || req.Request == nil {
			http.Error(w, fmt.Sprintf("Request could not be decoded: %v", decodeError(body, err)), http.StatusBadRequest)
			return
		}
		// A v1beta1 review is answered through the same v1 handler (main.go
		// newDelegateToV1AdmitHandler): the two versions' JSON is the same.
		out := admit(req)
		if out == nil {
			// Upstream's handlers return nil for a resource they do not expect, and main.go then
			// sets the UID on a nil response: the program panics, net/http recovers and drops
			// the connection. Answered the same way here.
			panic(http.ErrAbortHandler)
		}
		out.UID = req.Request.UID
		resp = admissionReview{typeMeta: tm, Response: out}
	}
	if resp == nil {
		msg := fmt.Sprintf("Unsupported group version kind: %v", tm.gvkString())
		k.printf('E', "main.go:156", "%s", msg)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	data, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// decodeError is what the universal deserializer says of a body it cannot decode.
func decodeError(body []byte, err error) error {
	if err != nil {
		return fmt.Errorf("couldn't get version/kind; json parse error: %v", err)
	}
	return fmt.Errorf("Object 'Kind' is missing in '%s'", truncate(string(body), 512))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// errorResponse is convert.go toV1AdmissionResponse: not allowed, with the error as message.
func errorResponse(err error) *admissionResponse {
	return &admissionResponse{Result: &apiStatus{Message: err.Error()}}
}

// jsonPatch is a response allowing the request with a JSON patch.
func jsonPatch(patch string) *admissionResponse {
	pt := "JSONPatch"
	return &admissionResponse{Allowed: true, Patch: []byte(patch), PatchType: &pt}
}

// The patches of addlabel.go, pods.go, configmap.go and customresource.go, byte for byte.
const (
	addFirstLabelPatch = `[
         { "op": "add", "path": "/metadata/labels", "value": {"added-label": "yes"}}
     ]`
	addAdditionalLabelPatch = `[
         { "op": "add", "path": "/metadata/labels/added-label", "value": "yes" }
     ]`
	updateLabelPatch = `[
         { "op": "replace", "path": "/metadata/labels/added-label", "value": "yes" }
     ]`
	podsInitContainerPatch = `[
		 {"op":"add","path":"/spec/initContainers","value":[{"image":"webhook-added-image","name":"webhook-added-init-container","resources":{}}]}
	]`
	podsSidecarPatch = `[
		{"op":"add", "path":"/spec/containers/-","value":{"image":"%v","name":"webhook-added-sidecar","resources":{}}}
	]`
	dataStage1Patch = `[
         { "op": "add", "path": "/data/mutation-stage-1", "value": "yes" }
     ]`
	dataStage2Patch = `[
         { "op": "add", "path": "/data/mutation-stage-2", "value": "yes" }
     ]`
)

// objectMeta is the metadata the handlers read.
type objectMeta struct {
	Name   string            `json:"name,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// podObject is what the pod handlers read of a Pod (upstream decodes a corev1.Pod).
type podObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Containers     []struct{ Name string } `json:"containers"`
		InitContainers []struct{ Name string } `json:"initContainers"`
	} `json:"spec"`
}

// dataObject is a ConfigMap or the e2e custom resource: metadata and a string map "data"
// (customresource.go decodes {ObjectMeta; Data} with encoding/json: field names match either case).
type dataObject struct {
	Metadata objectMeta        `json:"metadata"`
	Data     map[string]string `json:"data"`
}

var podResource = groupVersionResource{Group: "", Version: "v1", Resource: "pods"}
var configMapResource = groupVersionResource{Group: "", Version: "v1", Resource: "configmaps"}

// addLabel is addlabel.go: the added-label=yes label, added or set by patch.
func addLabel(ar admissionReview) *admissionResponse {
	var obj struct {
		Metadata objectMeta `json:"metadata,omitempty"`
	}
	if err := json.Unmarshal(ar.Request.Object, &obj); err != nil {
		return errorResponse(err)
	}
	v, has := obj.Metadata.Labels["added-label"]
	switch {
	case len(obj.Metadata.Labels) == 0:
		return jsonPatch(addFirstLabelPatch)
	case !has:
		return jsonPatch(addAdditionalLabelPatch)
	case v != "yes":
		return jsonPatch(updateLabelPatch)
	}
	return &admissionResponse{Allowed: true}
}

func decodePod(raw []byte) (podObject, error) {
	var pod podObject
	err := json.Unmarshal(raw, &pod)
	return pod, err
}

// admitPods is pods.go admitPods: a pod labelled webhook-e2e-test=webhook-disallow or with a
// container named *webhook-disallow* is denied; =wait-forever never gets an answer.
func admitPods(p *kernel.Proc, ar admissionReview) *admissionResponse {
	if ar.Request.Resource != podResource {
		return errorResponse(fmt.Errorf("expect resource to be %s", podResource))
	}
	pod, err := decodePod(ar.Request.Object)
	if err != nil {
		return errorResponse(err)
	}
	resp := &admissionResponse{Allowed: true}
	var msg string
	if v, ok := pod.Metadata.Labels["webhook-e2e-test"]; ok {
		if v == "webhook-disallow" {
			resp.Allowed = false
			msg += "the pod contains unwanted label; "
		}
		if v == "wait-forever" {
			// pods.go:70: sleeps forever, so the API server's call times out. Here until the
			// process ends.
			<-p.Ctx().Done()
			panic(http.ErrAbortHandler)
		}
	}
	for _, c := range pod.Spec.Containers {
		if strings.Contains(c.Name, "webhook-disallow") {
			resp.Allowed = false
			msg += "the pod contains unwanted container name; "
		}
	}
	if !resp.Allowed {
		resp.Result = &apiStatus{Message: strings.TrimSpace(msg)}
	}
	return resp
}

func hasContainer(cs []struct{ Name string }, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}

// applyPodPatch is pods.go applyPodPatch.
func applyPodPatch(ar admissionReview, should func(podObject) bool, patch string) *admissionResponse {
	if ar.Request.Resource != podResource {
		return nil
	}
	pod, err := decodePod(ar.Request.Object)
	if err != nil {
		return errorResponse(err)
	}
	if should(pod) {
		return jsonPatch(patch)
	}
	return &admissionResponse{Allowed: true}
}

// mutatePods is pods.go mutatePods: webhook-to-be-mutated gets an init container.
func mutatePods(ar admissionReview) *admissionResponse {
	return applyPodPatch(ar, func(pod podObject) bool {
		return pod.Metadata.Name == "webhook-to-be-mutated" && !hasContainer(pod.Spec.InitContainers, "webhook-added-init-container")
	}, podsInitContainerPatch)
}

// mutatePodsSidecar is pods.go mutatePodsSidecar.
func mutatePodsSidecar(ar admissionReview, image string) *admissionResponse {
	if image == "" {
		return &admissionResponse{Allowed: false, Result: &apiStatus{Status: "Failure", Message: "No image specified by the sidecar-image parameter", Code: 500}}
	}
	return applyPodPatch(ar, func(pod podObject) bool {
		return !hasContainer(pod.Spec.Containers, "webhook-added-sidecar")
	}, fmt.Sprintf(podsSidecarPatch, image))
}

// denySpecificAttachment is pods.go: attaching to container1 of to-be-attached-pod with stdin
// is denied.
func denySpecificAttachment(ar admissionReview) *admissionResponse {
	if ar.Request.Name != "to-be-attached-pod" {
		return &admissionResponse{Allowed: true}
	}
	if ar.Request.Resource != podResource {
		return errorResponse(fmt.Errorf("expect resource to be %s, got %s", podResource, ar.Request.Resource))
	}
	if ar.Request.SubResource != "attach" {
		return errorResponse(fmt.Errorf("expect subresource to be %s, got %s", "attach", ar.Request.SubResource))
	}
	var opts struct {
		Stdin     bool   `json:"stdin,omitempty"`
		Container string `json:"container,omitempty"`
	}
	if err := json.Unmarshal(ar.Request.Object, &opts); err != nil {
		return errorResponse(err)
	}
	if !opts.Stdin || opts.Container != "container1" {
		return &admissionResponse{Allowed: true}
	}
	return &admissionResponse{Allowed: false, Result: &apiStatus{Message: "attaching to pod 'to-be-attached-pod' is not allowed"}}
}

// admitData is configmap.go admitConfigMaps and customresource.go admitCustomResource: data
// webhook-e2e-test=webhook-disallow denies a create or update, =webhook-nondeletable a delete.
func admitData(ar admissionReview, what string) *admissionResponse {
	raw := ar.Request.Object
	if ar.Request.Operation == opDelete {
		raw = ar.Request.OldObject
	}
	var obj dataObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return errorResponse(err)
	}
	resp := &admissionResponse{Allowed: true}
	v, ok := obj.Data["webhook-e2e-test"]
	op := ar.Request.Operation
	if ok && v == "webhook-disallow" && (op == opCreate || op == opUpdate) {
		resp.Allowed = false
		reason := "the configmap contains unwanted key and value"
		if what == "custom resource" {
			reason = "the custom resource contains unwanted data"
		}
		resp.Result = &apiStatus{Reason: reason}
	}
	if ok && v == "webhook-nondeletable" && op == opDelete {
		resp.Allowed = false
		resp.Result = &apiStatus{Reason: ("the " + what + " cannot be deleted because it contains unwanted key and value")}
	}
	return resp
}

func admitConfigMaps(ar admissionReview) *admissionResponse {
	if ar.Request.Resource != configMapResource {
		return nil
	}
	return admitData(ar, "configmap")
}

func admitCustomResource(ar admissionReview) *admissionResponse {
	return admitData(ar, "custom resource")
}

// mutateData is configmap.go mutateConfigmaps and customresource.go mutateCustomResource: a
// two-stage mutation keyed on the data.
func mutateData(ar admissionReview) *admissionResponse {
	var obj dataObject
	if err := json.Unmarshal(ar.Request.Object, &obj); err != nil {
		return errorResponse(err)
	}
	patch := ""
	if obj.Data["mutation-start"] == "yes" {
		patch = dataStage1Patch
	}
	if obj.Data["mutation-stage-1"] == "yes" {
		patch = dataStage2Patch
	}
	if patch == "" {
		return &admissionResponse{Allowed: true}
	}
	return jsonPatch(patch)
}

func mutateConfigMaps(ar admissionReview) *admissionResponse {
	if ar.Request.Resource != configMapResource {
		return nil
	}
	return mutateData(ar)
}

func mutateCustomResource(ar admissionReview) *admissionResponse {
	return mutateData(ar)
}

// admitCRD is crd.go admitCRD: a CustomResourceDefinition labelled
// webhook-e2e-test=webhook-disallow is denied.
func admitCRD(ar admissionReview) *admissionResponse {
	v1beta1 := groupVersionResource{Group: "apiextensions.k8s.io", Version: "v1beta1", Resource: "customresourcedefinitions"}
	v1 := groupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if ar.Request.Resource != v1beta1 && ar.Request.Resource != v1 {
		return errorResponse(fmt.Errorf("expect resource to be one of [%v, %v] but got %v", v1beta1, v1, ar.Request.Resource))
	}
	var crd struct {
		Metadata objectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(ar.Request.Object, &crd); err != nil {
		return errorResponse(err)
	}
	resp := &admissionResponse{Allowed: true}
	if crd.Metadata.Labels["webhook-e2e-test"] == "webhook-disallow" {
		resp.Allowed = false
		resp.Result = &apiStatus{Message: "the crd contains unwanted label"}
	}
	return resp
}
