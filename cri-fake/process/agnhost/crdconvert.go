package agnhost

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// crdConversionWebhook follows crd-conversion-webhook/main.go and converter/: an HTTPS server on
// --port (443; the specs pass 8444) with /crdconvert, converting the e2e CRD's objects between
// stable.example.com/v1 (hostPort "h:p") and v2 (host and port), in ConversionReview
// apiextensions.k8s.io/v1 and v1beta1, JSON or YAML in and out; and /readyz. Upstream also builds
// an in-cluster client it never uses: that is left out.
func crdConversionWebhook(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	certFile := fs.String("tls-cert-file", "", "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert.")
	keyFile := fs.String("tls-private-key-file", "", "File containing the default x509 private key matching --tls-cert-file.")
	port := fs.Int("port", 443, "Secure port that the webhook listens on")
	return func([]string) int {
		k := newKlog(p)
		cert, err := loadKeyPair(p, *certFile, *keyFile)
		if err != nil {
			k.printf('F', "config.go:47", "%v", err)
			return 255
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/crdconvert", func(w http.ResponseWriter, r *http.Request) { serveConversion(k, w, r) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
		srv, err := listenHTTP(p, *port, mux, &tls.Config{Certificates: []tls.Certificate{cert}})
		if err != nil {
			return panicExit(p, listenError("tcp", *port, err))
		}
		srv.serve(p)
		return waitEnd(p)
	}
}

// mediaSubtype is "json" or "yaml" for application/json and application/yaml (converter's
// serializers), "" otherwise.
func mediaSubtype(contentType string) string {
	t, sub, ok := strings.Cut(contentType, "/")
	if !ok || t != "application" || (sub != "json" && sub != "yaml") {
		return ""
	}
	return sub
}

// outputSubtype is framework.go getOutputSerializer: no Accept is JSON; otherwise the first
// clause that is application/json, application/yaml, application/* or */*.
func outputSubtype(accept string) string {
	if accept == "" {
		return "json"
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
			return "json"
		case "application/yaml":
			return "yaml"
		}
	}
	return ""
}

// serveConversion is converter/framework.go serve.
func serveConversion(k *klog, w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
	contentType := r.Header.Get("Content-Type")
	in := mediaSubtype(contentType)
	if in == "" {
		msg := fmt.Sprintf("invalid Content-Type header `%s`", contentType)
		k.printf('E', "framework.go:131", "%s", msg)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	data := body
	if in == "yaml" {
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			http.Error(w, fmt.Sprintf("failed to deserialize body (%v) with error %v", string(body), err), http.StatusBadRequest)
			return
		}
		data = j
	}
	var review conversionReview
	if err := json.Unmarshal(data, &review); err != nil {
		msg := fmt.Sprintf("failed to deserialize body (%v) with error couldn't get version/kind; json parse error: %v", string(body), err)
		k.printf('E', "framework.go:139", "%v", err)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	if g, v, kind := review.gvk(); g != "apiextensions.k8s.io" || (v != "v1" && v != "v1beta1") || kind != "ConversionReview" {
		msg := fmt.Sprintf("Unsupported group version kind: %v", review.gvkString())
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		review.Request = &conversionRequest{}
	}
	resp := convertObjects(review.Request)
	resp.UID = review.Request.UID
	// framework.go:180: the request is reset, not dropped.
	out := conversionReview{typeMeta: review.typeMeta, Request: &conversionRequest{}, Response: resp}
	sub := outputSubtype(r.Header.Get("Accept"))
	if sub == "" {
		msg := fmt.Sprintf("invalid accept header `%s`", r.Header.Get("Accept"))
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	enc, err := json.Marshal(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if sub == "yaml" {
		if enc, err = yaml.JSONToYAML(enc); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write(enc)
		return
	}
	// The apimachinery JSON serializer ends its output with a newline.
	w.Write(append(enc, '\n'))
}

// convertObjects is framework.go doConversionV1 with example_converter.go convertExampleCRD.
func convertObjects(req *conversionRequest) *conversionResponse {
	failure := func(format string, args ...any) *conversionResponse {
		return &conversionResponse{Result: apiStatus{Status: statusFailure, Message: fmt.Sprintf(format, args...)}}
	}
	var converted []json.RawMessage
	for _, raw := range req.Objects {
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil || obj == nil {
			if err == nil {
				err = fmt.Errorf("Object 'Kind' is missing in '%s'", truncate(string(raw), 512))
			}
			return failure("failed to unmarshall object (%v) with error: %v", string(raw), err)
		}
		if kind, _ := obj["kind"].(string); kind == "" {
			return failure("failed to unmarshall object (%v) with error: Object 'Kind' is missing in '%s'", string(raw), truncate(string(raw), 512))
		}
		from, _ := obj["apiVersion"].(string)
		to := req.DesiredAPIVersion
		if to == from {
			return failure("conversion from a version to itself should not call the webhook: %s", to)
		}
		switch from {
		case "stable.example.com/v1":
			if to != "stable.example.com/v2" {
				return failure("unexpected conversion version %q", to)
			}
			if hp, ok := obj["hostPort"]; ok {
				delete(obj, "hostPort")
				s, _ := hp.(string)
				parts := strings.Split(s, ":")
				if len(parts) != 2 {
					return failure("invalid hostPort value `%v`", hp)
				}
				obj["host"], obj["port"] = parts[0], parts[1]
			}
		case "stable.example.com/v2":
			if to != "stable.example.com/v1" {
				return failure("unexpected conversion version %q", to)
			}
			host, hasHost := obj["host"]
			port, hasPort := obj["port"]
			if hasHost || hasPort {
				if !hasHost {
					host = ""
				}
				if !hasPort {
					port = ""
				}
				obj["hostPort"] = fmt.Sprintf("%s:%s", host, port)
				delete(obj, "host")
				delete(obj, "port")
			}
		default:
			return failure("unexpected conversion version %q", from)
		}
		obj["apiVersion"] = to
		out, err := json.Marshal(obj)
		if err != nil {
			return failure("%v", err)
		}
		converted = append(converted, out)
	}
	return &conversionResponse{ConvertedObjects: converted, Result: apiStatus{Status: statusSuccess}}
}
