package images

import (
	"slices"
	"testing"
)

// What Get returns shares its tag and digest lists with the store, so the store must never
// change them in place: an image got before a tag moves away or another tag arrives still shows
// what it had.
func TestGetResultUnchangedByLaterPulls(t *testing.T) {
	s := NewStore()
	a := &CatalogImage{ID: "sha256:" + hex64('a'), Digest: "sha256:" + hex64('1')}
	b := &CatalogImage{ID: "sha256:" + hex64('b'), Digest: "sha256:" + hex64('2')}
	ref := func(r string) Reference {
		t.Helper()
		p, err := ParseReference(r)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tag := range []string{"v1", "v3", "v5"} { // three tags: the list has room for a fourth
		s.Add(a, ref("example.com/app:"+tag))
	}
	got, ok := s.Get(a.ID)
	if !ok {
		t.Fatal("image not found")
	}
	tags, digests := slices.Clone(got.RepoTags), slices.Clone(got.RepoDigests)
	s.Add(b, ref("example.com/app:v1"))           // v1 moves to b
	s.Add(a, ref("example.com/app:v2"))           // inserted before v3
	s.Add(a, ref("example.com/app@"+a.Digest))    // digest already there
	s.Add(a, ref("other.example.com/app:latest")) // a second repository digest
	if !slices.Equal(got.RepoTags, tags) || !slices.Equal(got.RepoDigests, digests) {
		t.Errorf("earlier result changed: tags %v digests %v, was %v %v", got.RepoTags, got.RepoDigests, tags, digests)
	}
	now, _ := s.Get(a.ID)
	if want := []string{"example.com/app:v2", "example.com/app:v3", "example.com/app:v5", "other.example.com/app:latest"}; !slices.Equal(now.RepoTags, want) {
		t.Errorf("tags now %v, want %v", now.RepoTags, want)
	}
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
