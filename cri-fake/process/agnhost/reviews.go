package agnhost

import "encoding/json"

// The wire forms of the API objects the webhooks read and answer, field for field as
// k8s.io/api and k8s.io/apimachinery serialise them (admission/v1 types.go, meta/v1 types.go,
// apiextensions/v1 types.go), so that the answers are byte for byte upstream's. They are written
// here rather than imported: those packages would bring apimachinery's runtime into cri-fake
// (4.7 MB of binary) for a few structs.

// typeMeta is metav1.TypeMeta.
type typeMeta struct {
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// gvk splits apiVersion into group and version.
func (t typeMeta) gvk() (group, version, kind string) {
	group, version = "", t.APIVersion
	for i := len(t.APIVersion) - 1; i >= 0; i-- {
		if t.APIVersion[i] == '/' {
			group, version = t.APIVersion[:i], t.APIVersion[i+1:]
			break
		}
	}
	return group, version, t.Kind
}

// gvkString is schema.GroupVersionKind's String: "group/version, Kind=kind".
func (t typeMeta) gvkString() string {
	g, v, k := t.gvk()
	return g + "/" + v + ", Kind=" + k
}

// apiStatus is metav1.Status (its ListMeta is always written, as "metadata":{}).
type apiStatus struct {
	typeMeta `json:",inline"`
	Metadata struct{}        `json:"metadata"`
	Status   string          `json:"status,omitempty"`
	Message  string          `json:"message,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Details  json.RawMessage `json:"details,omitempty"`
	Code     int32           `json:"code,omitempty"`
}

const (
	statusSuccess = "Success"
	statusFailure = "Failure"
)

// groupVersionResource is metav1.GroupVersionResource.
type groupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

// String is schema.GroupVersionResource's form, as the handlers' errors print it ("{ v1 pods}").
func (r groupVersionResource) String() string {
	return "{" + r.Group + " " + r.Version + " " + r.Resource + "}"
}

// Operations of an admission request.
const (
	opCreate = "CREATE"
	opUpdate = "UPDATE"
	opDelete = "DELETE"
)

// admissionRequest is admission/v1 (and v1beta1) AdmissionRequest: what the handlers read;
// the rest of the request is not echoed back.
type admissionRequest struct {
	UID         string               `json:"uid"`
	Resource    groupVersionResource `json:"resource"`
	SubResource string               `json:"subResource,omitempty"`
	Name        string               `json:"name,omitempty"`
	Namespace   string               `json:"namespace,omitempty"`
	Operation   string               `json:"operation"`
	Object      json.RawMessage      `json:"object,omitempty"`
	OldObject   json.RawMessage      `json:"oldObject,omitempty"`
}

// admissionResponse is admission/v1 AdmissionResponse.
type admissionResponse struct {
	UID              string            `json:"uid"`
	Allowed          bool              `json:"allowed"`
	Result           *apiStatus        `json:"status,omitempty"`
	Patch            []byte            `json:"patch,omitempty"`
	PatchType        *string           `json:"patchType,omitempty"`
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
}

// admissionReview is admission/v1 (and v1beta1) AdmissionReview.
type admissionReview struct {
	typeMeta `json:",inline"`
	Request  *admissionRequest  `json:"request,omitempty"`
	Response *admissionResponse `json:"response,omitempty"`
}

// conversionReview is apiextensions.k8s.io/v1 (and v1beta1) ConversionReview.
type conversionReview struct {
	typeMeta `json:",inline"`
	Request  *conversionRequest  `json:"request,omitempty"`
	Response *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               string            `json:"uid"`
	DesiredAPIVersion string            `json:"desiredAPIVersion"`
	Objects           []json.RawMessage `json:"objects"`
}

type conversionResponse struct {
	UID              string            `json:"uid"`
	ConvertedObjects []json.RawMessage `json:"convertedObjects"`
	Result           apiStatus         `json:"result"`
}
