package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"time"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// certValidity is long enough for any session on the fakes; the certificates die with the directory.
const certValidity = 365 * 24 * time.Hour

// ca is a certificate authority held in memory while `up` issues the cluster's certificates.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// newCA makes a self-signed CA. P-256 keys: every component of v1.37 accepts them, and they are made in
// microseconds where RSA-2048 takes tens of milliseconds each on a busy core.
func newCA(cn string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// certSpec says who a leaf certificate names and what it may be used for. The API server maps a client
// certificate's CN to the user name and each O to a group (x509 request authenticator); a serving
// certificate is checked against its DNS and IP SANs.
type certSpec struct {
	cn     string
	groups []string
	dns    []string
	ips    []net.IP
	server bool
	client bool
}

// keyPair is a leaf certificate and its key, PEM-encoded.
type keyPair struct {
	cert, key []byte
}

func (c *ca) issue(s certSpec) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     s.dns,
		IPAddresses:  s.ips,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM}, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func (c *ca) keyPEM() ([]byte, error) { return encodeKey(c.key) }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// write stores the pair as DIR/NAME.crt and DIR/NAME.key (the key readable by root only).
func (kp keyPair) write(dir, name string) error {
	if err := atomicfile.Write(filepath.Join(dir, name+".crt"), kp.cert, 0o644); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, name+".key"), kp.key, 0o600)
}

// serviceAccountKeys makes the key pair the API server signs service-account tokens with
// (--service-account-signing-key-file, ES256) and checks them with (--service-account-key-file), and
// the controller-manager signs the token controller's tokens with (--service-account-private-key-file).
func serviceAccountKeys(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	priv, err := encodeKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "sa.key"), priv, 0o600); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// kubeconfig is a kubeconfig file for one client certificate against one server.
func kubeconfig(server string, caPEM []byte, user string, kp keyPair) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: plugsim
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: plugsim
  context: {cluster: plugsim, user: %s}
current-context: plugsim
`, server, b64(caPEM), user, b64(kp.cert), b64(kp.key), user)
}
