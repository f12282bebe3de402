package images

import "testing"

func TestParseReference(t *testing.T) {
	const d = "sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"
	for _, tc := range []struct {
		in, want string
		wantErr  bool
	}{
		{in: "nginx", want: "docker.io/library/nginx:latest"},
		{in: "nginx:1.27", want: "docker.io/library/nginx:1.27"},
		{in: "library/nginx", want: "docker.io/library/nginx:latest"},
		{in: "bitnami/redis:7", want: "docker.io/bitnami/redis:7"},
		{in: "docker.io/nginx", want: "docker.io/library/nginx:latest"},
		{in: "index.docker.io/library/nginx", want: "docker.io/library/nginx:latest"},
		{in: "registry.k8s.io/pause:3.9", want: "registry.k8s.io/pause:3.9"},
		{in: "localhost:5000/app", want: "localhost:5000/app:latest"},
		{in: "localhost/app:v1", want: "localhost/app:v1"},
		{in: "gcr.io/x/y@" + d, want: "gcr.io/x/y@" + d},
		{in: "gcr.io/x/y:t@" + d, want: "gcr.io/x/y:t@" + d},
		{in: "", wantErr: true},
		{in: "team/UPPER", wantErr: true},
		{in: "nginx@sha256:abc", wantErr: true},
		{in: "nginx:bad tag", wantErr: true},
		{in: "a//b", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseReference(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && got.String() != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
