package agnhost

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// The service account files of a pod (rest.InClusterConfig's).
const (
	saTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	saCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// issuerDiscovery follows openidmetadata/openidmetadata.go: it reads the projected token at
// --token-path, fetches the OIDC discovery document of the token's issuer and its JWKS through
// the API server with the pod's in-cluster credentials (then, failing that, without them, as an
// external client), verifies the token's signature (RS256, ES256, ES384, ES512), issuer, audience
// (--audience) and expiry as go-oidc does, and exits 0; log.Fatal (exit 1) otherwise.
func issuerDiscovery(p *kernel.Proc, fs *pflag.FlagSet) func([]string) int {
	tokenPath := fs.String("token-path", "", "Path to read service account token from.")
	audience := fs.String("audience", "", "Audience to check on received token.")
	return func([]string) int {
		l := goLogger(p)
		raw, err := p.ReadFileBounded(p.Abs(*tokenPath))
		if err != nil {
			return fatal(l, "%v", goPathError(err, *tokenPath))
		}
		token := string(raw)
		l.Print("OK: Got token")
		l.Print("validating with in-cluster discovery")
		client, err := inClusterClient(p)
		if err != nil {
			return fatal(l, "%v", err)
		}
		code, err := validateToken(p, l, client, token, *audience)
		if err == nil {
			return 0
		}
		if code != 0 {
			return code
		}
		l.Print("failed to validate with in-cluster discovery: ", err)
		l.Print("falling back to validating with external discovery")
		external, _ := httpClient(p, 30*time.Second, &tls.Config{RootCAs: x509.NewCertPool()})
		if code, err = validateToken(p, l, external, token, *audience); err != nil {
			if code != 0 {
				return code
			}
			return fatal(l, "%v", err)
		}
		return 0
	}
}

// inClusterClient is rest.InClusterConfig + rest.TransportFor: the service account token as a
// bearer token, the cluster CA as the only root.
func inClusterClient(p *kernel.Proc) (*http.Client, error) {
	host, port := p.Getenv("KUBERNETES_SERVICE_HOST"), p.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined")
	}
	token, err := p.ReadFileBounded(saTokenFile)
	if err != nil {
		return nil, err
	}
	ca, err := p.ReadFileBounded(saCAFile)
	if err != nil {
		return nil, fmt.Errorf("expected to load root CA config from %s, but got err: %v", saCAFile, err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	client, tr := httpClient(p, 30*time.Second, &tls.Config{RootCAs: roots})
	client.Transport = bearer{token: strings.TrimSpace(string(token)), rt: tr, host: net.JoinHostPort(host, port)}
	return client, nil
}

// bearer adds the service account token to requests for the API server.
type bearer struct {
	token string
	host  string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// jwtClaims are the claims the program reads and prints.
type jwtClaims struct {
	Issuer     string          `json:"iss"`
	Subject    string          `json:"sub"`
	Audience   json.RawMessage `json:"aud"`
	Expiry     *json.Number    `json:"exp"`
	NotBefore  *json.Number    `json:"nbf"`
	IssuedAt   *json.Number    `json:"iat"`
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

func (c jwtClaims) audiences() []string {
	var one string
	if json.Unmarshal(c.Audience, &one) == nil {
		return []string{one}
	}
	var many []string
	json.Unmarshal(c.Audience, &many)
	return many
}

// validateToken is openidmetadata.go validate with go-oidc's NewProvider and Verify. A token
// that is not a JWT at all is fatal (code 1), as jwt.ParseSigned's error is there.
func validateToken(p *kernel.Proc, l *log.Logger, client *http.Client, raw, audience string) (int, error) {
	parts := strings.Split(strings.TrimSpace(raw), ".")
	if len(parts) != 3 {
		l.Printf("go-jose/go-jose: compact JWS format must have three parts")
		return 1, errors.New("compact JWS format must have three parts")
	}
	var header struct{ Alg, Kid string }
	var claims jwtClaims
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	if err1 != nil || err2 != nil || json.Unmarshal(hb, &header) != nil || json.Unmarshal(cb, &claims) != nil {
		l.Printf("go-jose/go-jose: error in cryptographic primitive")
		return 1, errors.New("malformed JWT")
	}
	l.Printf("OK: got issuer %s", claims.Issuer)
	l.Printf("Full, not-validated claims: \n%s", claims.describe())
	ctx, cancel := context.WithTimeout(p.Ctx(), time.Minute)
	defer cancel()
	// go-oidc NewProvider: the discovery document, whose issuer must be the token's.
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, client, strings.TrimSuffix(claims.Issuer, "/")+"/.well-known/openid-configuration", &discovery); err != nil {
		return 0, err
	}
	if discovery.Issuer != claims.Issuer {
		return 0, fmt.Errorf("oidc: issuer did not match the issuer returned by provider, expected %q got %q", claims.Issuer, discovery.Issuer)
	}
	l.Printf("OK: Constructed OIDC provider for issuer %v", claims.Issuer)
	// go-oidc Verify: issuer, audience, expiry, then the signature with the provider's keys.
	if !slices.Contains(claims.audiences(), audience) {
		return 0, fmt.Errorf("oidc: expected audience %q got %q", audience, claims.audiences())
	}
	if claims.Expiry != nil {
		if exp, err := claims.Expiry.Int64(); err == nil && time.Now().After(time.Unix(exp, 0)) {
			return 0, fmt.Errorf("oidc: token is expired (Token Expiry: %v)", time.Unix(exp, 0))
		}
	}
	if !slices.Contains([]string{"RS256", "ES256", "ES384", "ES512"}, header.Alg) {
		return 0, fmt.Errorf("oidc: id token signed with unsupported algorithm, expected [\"RS256\" \"ES256\" \"ES384\" \"ES512\"] got %q", header.Alg)
	}
	var jwks struct {
		Keys []jsonWebKey `json:"keys"`
	}
	if err := getJSON(ctx, client, discovery.JWKSURI, &jwks); err != nil {
		return 0, fmt.Errorf("fetching keys oidc: get keys failed: %v", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return 0, fmt.Errorf("oidc: malformed jwt: %v", err)
	}
	signed := []byte(parts[0] + "." + parts[1])
	verified := false
	for _, k := range jwks.Keys {
		if header.Kid != "" && k.Kid != "" && k.Kid != header.Kid {
			continue
		}
		if k.verify(header.Alg, signed, sig) {
			verified = true
			break
		}
	}
	if !verified {
		return 0, errors.New("failed to verify signature: failed to verify id token signature")
	}
	l.Print("OK: Validated signature on JWT")
	l.Print("OK: Got valid claims from token!")
	l.Printf("Full, validated claims: \n%s", claims.describe())
	return 0, nil
}

func (c jwtClaims) describe() string {
	return fmt.Sprintf("%s/%s for %v (issuer %s, subject %s)", c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name, c.audiences(), c.Issuer, c.Subject)
}

func getJSON(ctx context.Context, client *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("oidc: failed to decode provider discovery object: %v", err)
	}
	return nil
}

// jsonWebKey is an RSA or EC public key of a JWKS (RFC 7517, 7518).
type jsonWebKey struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// verify checks a JWS signature (RFC 7518 section 3) with the key.
func (k jsonWebKey) verify(alg string, signed, sig []byte) bool {
	b64 := func(s string) *big.Int {
		d, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return nil
		}
		return new(big.Int).SetBytes(d)
	}
	switch {
	case k.Kty == "RSA" && alg == "RS256":
		n, e := b64(k.N), b64(k.E)
		if n == nil || e == nil || !e.IsInt64() || e.Int64() > 1<<31 || n.BitLen() > 8192 {
			return false
		}
		sum := sha256.Sum256(signed)
		return rsa.VerifyPKCS1v15(&rsa.PublicKey{N: n, E: int(e.Int64())}, crypto.SHA256, sum[:], sig) == nil
	case k.Kty == "EC":
		var curve elliptic.Curve
		var digest []byte
		switch {
		case alg == "ES256" && k.Crv == "P-256":
			s := sha256.Sum256(signed)
			curve, digest = elliptic.P256(), s[:]
		case alg == "ES384" && k.Crv == "P-384":
			s := sha512.Sum384(signed)
			curve, digest = elliptic.P384(), s[:]
		case alg == "ES512" && k.Crv == "P-521":
			s := sha512.Sum512(signed)
			curve, digest = elliptic.P521(), s[:]
		default:
			return false
		}
		x, y := b64(k.X), b64(k.Y)
		size := (curve.Params().BitSize + 7) / 8
		if x == nil || y == nil || len(sig) != 2*size {
			return false
		}
		pub := &ecdsa.PublicKey{Curve: curve, X: x, Y: y}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		defer func() { recover() }() // a point off the curve panics in old APIs; it is no key
		return ecdsa.Verify(pub, digest, r, s)
	}
	return false
}
