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
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// admitFunc decides on one AdmissionReview v1 request (a v1beta1 one is converted to v1 and
// back, as main.go newDelegateToV1AdmitHandler does).
type admitFunc func(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse

// admissionMux is webhook/main.go's routes.
func admissionMux(p *kernel.Proc, sidecarImage string) *http.ServeMux {
	k := newKlog(p)
	mux := http.NewServeMux()
	handle := func(path string, f admitFunc) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { serveAdmission(k, w, r, f) })
	}
	handle("/always-allow-delay-5s", func(admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
		// alwaysallow.go: sleeps 5 s, then allows (the timeout specs rely on the delay).
		sleepCtx(p, 5*time.Second)
		return &admissionv1.AdmissionResponse{Allowed: true, Result: &metav1.Status{Message: "this webhook allows all requests"}}
	})
	handle("/always-deny", func(admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "this webhook denies all requests"}}
	})
	handle("/add-label", addLabel)
	handle("/pods", func(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse { return admitPods(p, ar) })
	handle("/pods/attach", denySpecificAttachment)
	handle("/mutating-pods", mutatePods)
	handle("/mutating-pods-sidecar", func(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
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
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil || tm.Kind == "" {
		msg := fmt.Sprintf("Request could not be decoded: %v", decodeError(body, err))
		k.printf('E', "main.go:123", "%s", msg)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	var resp any
	switch gv := tm.GroupVersionKind(); gv {
	case admissionv1beta1.SchemeGroupVersion.WithKind("AdmissionReview"):
		var req admissionv1beta1.AdmissionReview
		if err := json.Unmarshal(body, &req); err != nil || req.Request == nil {
			http.Error(w, fmt.Sprintf("Request could not be decoded: %v", decodeError(body, err)), http.StatusBadRequest)
			return
		}
		out := admit(admissionv1.AdmissionReview{Request: requestToV1(req.Request)})
		if out == nil {
			panic(http.ErrAbortHandler) // see the v1 case
		}
		review := admissionv1beta1.AdmissionReview{TypeMeta: tm, Response: responseToV1beta1(out)}
		review.Response.UID = req.Request.UID
		resp = review
	case admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"):
		var req admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &req); err != nil || req.Request == nil {
			http.Error(w, fmt.Sprintf("Request could not be decoded: %v", decodeError(body, err)), http.StatusBadRequest)
			return
		}
		out := admit(req)
		if out == nil {
			// Upstream's handlers return nil for a resource they do not expect, and main.go then
			// sets the UID on a nil response: the program panics, net/http recovers and drops
			// the connection. Answered the same way here.
			panic(http.ErrAbortHandler)
		}
		out.UID = req.Request.UID
		resp = admissionv1.AdmissionReview{TypeMeta: tm, Response: out}
	default:
		msg := fmt.Sprintf("Unsupported group version kind: %v", gv)
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

func requestToV1(r *admissionv1beta1.AdmissionRequest) *admissionv1.AdmissionRequest {
	if r == nil {
		return nil
	}
	return &admissionv1.AdmissionRequest{
		UID: r.UID, Kind: r.Kind, Resource: r.Resource, SubResource: r.SubResource, RequestKind: r.RequestKind,
		RequestResource: r.RequestResource, RequestSubResource: r.RequestSubResource, Name: r.Name, Namespace: r.Namespace,
		Operation: admissionv1.Operation(r.Operation), UserInfo: r.UserInfo, Object: r.Object, OldObject: r.OldObject,
		DryRun: r.DryRun, Options: r.Options,
	}
}

func responseToV1beta1(r *admissionv1.AdmissionResponse) *admissionv1beta1.AdmissionResponse {
	var pt *admissionv1beta1.PatchType
	if r.PatchType != nil {
		t := admissionv1beta1.PatchType(*r.PatchType)
		pt = &t
	}
	return &admissionv1beta1.AdmissionResponse{UID: r.UID, Allowed: r.Allowed, Result: r.Result, Patch: r.Patch,
		PatchType: pt, AuditAnnotations: r.AuditAnnotations, Warnings: r.Warnings}
}

// errorResponse is convert.go toV1AdmissionResponse: not allowed, with the error as message.
func errorResponse(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}
}

// jsonPatch is a response allowing the request with a JSON patch.
func jsonPatch(patch string) *admissionv1.AdmissionResponse {
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(patch), PatchType: &pt}
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
	metav1.TypeMeta `json:",inline"`
	Metadata        objectMeta `json:"metadata"`
	Spec            struct {
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

var podResource = metav1.GroupVersionResource{Group: "", Version: "v1", Resource: "pods"}
var configMapResource = metav1.GroupVersionResource{Group: "", Version: "v1", Resource: "configmaps"}

// addLabel is addlabel.go: the added-label=yes label, added or set by patch.
func addLabel(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	var obj struct {
		Metadata objectMeta `json:"metadata,omitempty"`
	}
	if err := json.Unmarshal(ar.Request.Object.Raw, &obj); err != nil {
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
	return &admissionv1.AdmissionResponse{Allowed: true}
}

func decodePod(raw []byte) (podObject, error) {
	var pod podObject
	err := json.Unmarshal(raw, &pod)
	return pod, err
}

// admitPods is pods.go admitPods: a pod labelled webhook-e2e-test=webhook-disallow or with a
// container named *webhook-disallow* is denied; =wait-forever never gets an answer.
func admitPods(p *kernel.Proc, ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	if ar.Request.Resource != podResource {
		return errorResponse(fmt.Errorf("expect resource to be %s", podResource))
	}
	pod, err := decodePod(ar.Request.Object.Raw)
	if err != nil {
		return errorResponse(err)
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
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
		resp.Result = &metav1.Status{Message: strings.TrimSpace(msg)}
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
func applyPodPatch(ar admissionv1.AdmissionReview, should func(podObject) bool, patch string) *admissionv1.AdmissionResponse {
	if ar.Request.Resource != podResource {
		return nil
	}
	pod, err := decodePod(ar.Request.Object.Raw)
	if err != nil {
		return errorResponse(err)
	}
	if should(pod) {
		return jsonPatch(patch)
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// mutatePods is pods.go mutatePods: webhook-to-be-mutated gets an init container.
func mutatePods(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	return applyPodPatch(ar, func(pod podObject) bool {
		return pod.Metadata.Name == "webhook-to-be-mutated" && !hasContainer(pod.Spec.InitContainers, "webhook-added-init-container")
	}, podsInitContainerPatch)
}

// mutatePodsSidecar is pods.go mutatePodsSidecar.
func mutatePodsSidecar(ar admissionv1.AdmissionReview, image string) *admissionv1.AdmissionResponse {
	if image == "" {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Status: "Failure", Message: "No image specified by the sidecar-image parameter", Code: 500}}
	}
	return applyPodPatch(ar, func(pod podObject) bool {
		return !hasContainer(pod.Spec.Containers, "webhook-added-sidecar")
	}, fmt.Sprintf(podsSidecarPatch, image))
}

// denySpecificAttachment is pods.go: attaching to container1 of to-be-attached-pod with stdin
// is denied.
func denySpecificAttachment(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	if ar.Request.Name != "to-be-attached-pod" {
		return &admissionv1.AdmissionResponse{Allowed: true}
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
	if err := json.Unmarshal(ar.Request.Object.Raw, &opts); err != nil {
		return errorResponse(err)
	}
	if !opts.Stdin || opts.Container != "container1" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "attaching to pod 'to-be-attached-pod' is not allowed"}}
}

// admitData is configmap.go admitConfigMaps and customresource.go admitCustomResource: data
// webhook-e2e-test=webhook-disallow denies a create or update, =webhook-nondeletable a delete.
func admitData(ar admissionv1.AdmissionReview, what string) *admissionv1.AdmissionResponse {
	raw := ar.Request.Object.Raw
	if ar.Request.Operation == admissionv1.Delete {
		raw = ar.Request.OldObject.Raw
	}
	var obj dataObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return errorResponse(err)
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	v, ok := obj.Data["webhook-e2e-test"]
	op := ar.Request.Operation
	if ok && v == "webhook-disallow" && (op == admissionv1.Create || op == admissionv1.Update) {
		resp.Allowed = false
		reason := "the configmap contains unwanted key and value"
		if what == "custom resource" {
			reason = "the custom resource contains unwanted data"
		}
		resp.Result = &metav1.Status{Reason: metav1.StatusReason(reason)}
	}
	if ok && v == "webhook-nondeletable" && op == admissionv1.Delete {
		resp.Allowed = false
		resp.Result = &metav1.Status{Reason: metav1.StatusReason("the " + what + " cannot be deleted because it contains unwanted key and value")}
	}
	return resp
}

func admitConfigMaps(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	if ar.Request.Resource != configMapResource {
		return nil
	}
	return admitData(ar, "configmap")
}

func admitCustomResource(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	return admitData(ar, "custom resource")
}

// mutateData is configmap.go mutateConfigmaps and customresource.go mutateCustomResource: a
// two-stage mutation keyed on the data.
func mutateData(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	var obj dataObject
	if err := json.Unmarshal(ar.Request.Object.Raw, &obj); err != nil {
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
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return jsonPatch(patch)
}

func mutateConfigMaps(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	if ar.Request.Resource != configMapResource {
		return nil
	}
	return mutateData(ar)
}

func mutateCustomResource(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	return mutateData(ar)
}

// admitCRD is crd.go admitCRD: a CustomResourceDefinition labelled
// webhook-e2e-test=webhook-disallow is denied.
func admitCRD(ar admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	v1beta1 := metav1.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1beta1", Resource: "customresourcedefinitions"}
	v1 := metav1.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if ar.Request.Resource != v1beta1 && ar.Request.Resource != v1 {
		return errorResponse(fmt.Errorf("expect resource to be one of [%v, %v] but got %v", v1beta1, v1, ar.Request.Resource))
	}
	var crd struct {
		Metadata objectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(ar.Request.Object.Raw, &crd); err != nil {
		return errorResponse(err)
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if crd.Metadata.Labels["webhook-e2e-test"] == "webhook-disallow" {
		resp.Allowed = false
		resp.Result = &metav1.Status{Message: "the crd contains unwanted label"}
	}
	return resp
}
