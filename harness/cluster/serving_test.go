package cluster

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// servingFields are the KubeletConfiguration fields the serving modes touch (k8s.io/kubelet
// config/v1beta1 names; that package would bring k8s.io/component-base into plugsim's module).
type servingFields struct {
	Address            string `json:"address"`
	Port               int    `json:"port"`
	TLSCertFile        string `json:"tlsCertFile"`
	TLSPrivateKeyFile  string `json:"tlsPrivateKeyFile"`
	ServerTLSBootstrap bool   `json:"serverTLSBootstrap"`
	Authentication     struct {
		X509 struct {
			ClientCAFile string `json:"clientCAFile"`
		} `json:"x509"`
	} `json:"authentication"`
}

// Each serving-certificate mode gives the KubeletConfiguration what that mode means (a YAML document
// with no key twice), and the API server checks the kubelets' certificates only when the cluster's CA
// signs them.
func TestKubeletServingModes(t *testing.T) {
	for _, tc := range []struct {
		mode                string
		certFile, bootstrap bool
		apiServerChecks     bool
	}{
		{ServingSelfSigned, false, false, false},
		{ServingBootstrap, false, true, true},
		{ServingClusterCA, true, false, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			b := kubeletConfig("/d/nodes/node1", "198.18.0.11", "/d/pki/ca.crt", tc.mode)
			var kc servingFields
			if err := yaml.Unmarshal(b, &kc); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			var doc map[string]any
			if err := yaml.UnmarshalStrict(b, &doc); err != nil { // a key given twice
				t.Fatalf("%v\n%s", err, b)
			}
			if got := kc.TLSCertFile != "" && kc.TLSPrivateKeyFile != ""; got != tc.certFile {
				t.Errorf("tlsCertFile %q tlsPrivateKeyFile %q: want set %v", kc.TLSCertFile, kc.TLSPrivateKeyFile, tc.certFile)
			}
			if tc.certFile && (!strings.HasPrefix(kc.TLSCertFile, "/d/nodes/node1/") || !strings.HasPrefix(kc.TLSPrivateKeyFile, "/d/nodes/node1/")) {
				t.Errorf("the serving certificate files are not the node's: %q %q", kc.TLSCertFile, kc.TLSPrivateKeyFile)
			}
			if kc.ServerTLSBootstrap != tc.bootstrap {
				t.Errorf("serverTLSBootstrap %v, want %v", kc.ServerTLSBootstrap, tc.bootstrap)
			}
			if got := apiServerChecksKubelets(tc.mode); got != tc.apiServerChecks {
				t.Errorf("the API server checks the kubelets' certificates: %v, want %v", got, tc.apiServerChecks)
			}
			// What every mode keeps: the node's address and port, and its callers checked.
			if kc.Address != "198.18.0.11" || kc.Port != 10250 || kc.Authentication.X509.ClientCAFile != "/d/pki/ca.crt" {
				t.Errorf("address %q port %v clientCAFile %q", kc.Address, kc.Port, kc.Authentication.X509.ClientCAFile)
			}
		})
	}
}

// A user's edit that turns serverTLSBootstrap on, appended as `harness cluster restart-kubelet --help`
// shows, gives a document that sets it once.
func TestServerTLSBootstrapAppended(t *testing.T) {
	b := append(kubeletConfig("/d/nodes/node1", "198.18.0.11", "/d/pki/ca.crt", ServingSelfSigned), "serverTLSBootstrap: true\n"...)
	var kc servingFields
	if err := yaml.UnmarshalStrict(b, new(map[string]any)); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if err := yaml.Unmarshal(b, &kc); err != nil || !kc.ServerTLSBootstrap {
		t.Fatalf("serverTLSBootstrap %v, err %v\n%s", kc.ServerTLSBootstrap, err, b)
	}
}
