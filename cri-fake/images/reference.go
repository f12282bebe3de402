package images

import (
	"fmt"
	"regexp"
	"strings"
)

// Reference is a parsed image reference in the normalised form containerd stores:
// "nginx" is docker.io/library/nginx:latest, "foo/bar" is docker.io/foo/bar:latest.
type Reference struct {
	// Repository is the fully qualified name without tag or digest: "docker.io/library/nginx".
	Repository string
	// Tag is empty when the reference names a digest only.
	Tag string
	// Digest is "sha256:<hex>" or empty.
	Digest string
}

// String returns the canonical form: repo:tag, repo@digest or repo:tag@digest.
func (r Reference) String() string {
	s := r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Tagged returns "repo:tag" (empty when the reference has no tag).
func (r Reference) Tagged() string {
	if r.Tag == "" {
		return ""
	}
	return r.Repository + ":" + r.Tag
}

// Digested returns "repo@digest" for a digest d.
func (r Reference) Digested(d string) string { return r.Repository + "@" + d }

var (
	// The grammar of github.com/distribution/reference, reduced to what a runtime checks.
	pathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)
	domainRe      = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?$`)
	tagRe         = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	digestRe      = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

// ParseReference normalises an image reference the way containerd's CRI plugin does
// (docker.io/library for a bare name, :latest when neither tag nor digest is given). A bare image
// ID ("sha256:<64 hex>" or 64 hex) is not a reference; callers look those up by ID first.
func ParseReference(s string) (Reference, error) {
	if s == "" {
		return Reference{}, fmt.Errorf("image reference is empty")
	}
	var ref Reference
	name := s
	if i := strings.Index(name, "@"); i >= 0 {
		ref.Digest = name[i+1:]
		name = name[:i]
		if !digestRe.MatchString(ref.Digest) {
			return Reference{}, fmt.Errorf("image reference %q: invalid digest %q (want sha256:<64 hex digits>)", s, ref.Digest)
		}
	}
	if i := strings.LastIndex(name, ":"); i >= 0 && !strings.Contains(name[i+1:], "/") {
		ref.Tag = name[i+1:]
		name = name[:i]
		if !tagRe.MatchString(ref.Tag) {
			return Reference{}, fmt.Errorf("image reference %q: invalid tag %q", s, ref.Tag)
		}
	}
	parts := strings.Split(name, "/")
	domain := "docker.io"
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost" || strings.ToLower(parts[0]) != parts[0]) {
		domain, parts = parts[0], parts[1:]
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if !domainRe.MatchString(domain) {
		return Reference{}, fmt.Errorf("image reference %q: invalid registry host %q", s, domain)
	}
	if domain == "docker.io" && len(parts) == 1 {
		parts = append([]string{"library"}, parts...)
	}
	for _, p := range parts {
		if !pathComponent.MatchString(p) {
			return Reference{}, fmt.Errorf("image reference %q: invalid repository name component %q (lower case letters, digits and separators only)", s, p)
		}
	}
	ref.Repository = domain + "/" + strings.Join(parts, "/")
	if ref.Tag == "" && ref.Digest == "" {
		ref.Tag = "latest"
	}
	return ref, nil
}

// IsID reports whether s looks like an image ID ("sha256:<64 hex>").
func IsID(s string) bool { return digestRe.MatchString(s) }
