package agnhost

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzReviews feeds hostile bodies to the admission webhook's and the conversion webhook's
// decoders (what an API server, or anything reaching the pod, sends): each request gets an
// answer or a dropped connection, never a crash of the handler beyond what net/http recovers.
func FuzzReviews(f *testing.F) {
	for _, s := range []string{
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","resource":{"version":"v1","resource":"pods"},"object":{"metadata":{"labels":{"webhook-e2e-test":"webhook-disallow"}},"spec":{"containers":[{"name":"c"}]}}}}`,
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u","object":{"data":{"mutation-start":"yes"}}}}`,
		`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"c","desiredAPIVersion":"stable.example.com/v2","objects":[{"apiVersion":"stable.example.com/v1","kind":"K","hostPort":"a:1"}]}}`,
		`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`, `{}`, `null`, `[`, "\x00",
	} {
		f.Add(s, uint8(0))
	}
	k := &klog{w: io.Discard}
	handlers := []admitFunc{addLabel, mutatePods, denySpecificAttachment, admitConfigMaps, mutateConfigMaps,
		admitCustomResource, mutateCustomResource, admitCRD,
		func(ar admissionReview) *admissionResponse {
			return mutatePodsSidecar(ar, "img")
		}}
	f.Fuzz(func(t *testing.T, body string, which uint8) {
		call := func(h http.HandlerFunc, contentType string) {
			defer func() {
				if r := recover(); r != nil && r != http.ErrAbortHandler {
					t.Fatalf("panic: %v", r)
				}
			}()
			req := httptest.NewRequest("POST", "/", strings.NewReader(body))
			req.Header.Set("Content-Type", contentType)
			h(httptest.NewRecorder(), req)
		}
		admit := handlers[int(which)%len(handlers)]
		call(func(w http.ResponseWriter, r *http.Request) { serveAdmission(k, w, r, admit) }, "application/json")
		call(func(w http.ResponseWriter, r *http.Request) { serveConversion(k, w, r) }, "application/json")
		call(func(w http.ResponseWriter, r *http.Request) { serveConversion(k, w, r) }, "application/yaml")
	})
}
