//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// crictl sees the example fixtures as the state cri-fake starts with, and the preloaded objects
// take part in the lifecycle: a RUNNING container stops, an EXITED one is removed, a CREATED one
// starts, a NOTREADY pod is removed with its containers.
func TestCrictlFixtures(t *testing.T) {
	file, err := filepath.Abs("../../examples/fixtures/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := startFake(t, "--cni-conf-dir=", "--fixtures", file)

	mustContain(t, "pods", f.crictl(t, "pods"), "web-7c9f", "Ready", "shop", "NotReady", "nightly-report", "jobs", "node-exporter", "monitoring")
	mustContain(t, "ps -a", f.crictl(t, "ps", "-a"), "nginx", "cart", "Running", "web-migrate", "Exited", "report", "exporter", "Created")
	mustContain(t, "images", f.crictl(t, "images"), "docker.io/library/nginx", "1.27", "registry.example.com/shop/cart", "2.1.0", "31.5MB", "registry.k8s.io/pause")
	mustContain(t, "inspect web-migrate", f.crictl(t, "inspect", "web-migrate"),
		`"state": "CONTAINER_EXITED"`, `"exitCode": 0`, `"reason": "Completed"`, `"startedAt": "2025-06-01T10:00:02Z"`, `"finishedAt": "2025-06-01T10:00:04Z"`)
	report := strings.TrimSpace(f.crictl(t, "ps", "-a", "-q", "--name", "report"))
	mustContain(t, "inspect report", f.crictl(t, "inspect", report), `"exitCode": 3`, `"reason": "Error"`, "report upload failed: connection refused")
	mustContain(t, "inspectp web-7c9f", f.crictl(t, "inspectp", "web-7c9f"), `"state": "SANDBOX_READY"`, `"ip": "10.88.`, `"createdAt": "2025-06-01T10:00:00Z"`)
	mustContain(t, "inspecti cart", f.crictl(t, "inspecti", "registry.example.com/shop/cart:2.1.0"), `"size": "31457280"`, `"value": "1000"`)

	nginx := strings.TrimSpace(f.crictl(t, "ps", "-q", "--name", "nginx"))
	f.crictl(t, "stop", nginx)
	mustContain(t, "inspect nginx", f.crictl(t, "inspect", nginx), `"state": "CONTAINER_EXITED"`)
	f.crictl(t, "rm", "web-migrate")
	exporter := strings.TrimSpace(f.crictl(t, "ps", "-a", "-q", "--name", "exporter"))
	f.crictl(t, "start", exporter)
	mustContain(t, "inspect exporter", f.crictl(t, "inspect", exporter), `"state": "CONTAINER_RUNNING"`)
	f.crictl(t, "rmp", strings.TrimSpace(f.crictl(t, "pods", "-q", "--name", "nightly-report")))
	if out := f.crictl(t, "ps", "-a", "-q", "--name", "report"); strings.TrimSpace(out) != "" {
		t.Fatalf("the removed pod's container is still there: %s", out)
	}
}
