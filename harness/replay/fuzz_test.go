package replay

import (
	"bytes"
	"testing"

	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/trace"
)

// FuzzScenario: whatever trace file `harness replay` is given, the conversion either fails with
// an error or writes a scenario that the scenario parser accepts; it never panics.
func FuzzScenario(f *testing.F) {
	f.Add([]byte(`{"seq":1,"time":"2026-01-02T03:04:05Z","interface":"CRI","service":"runtime.v1.RuntimeService","method":"RunPodSandbox","caller":"kubelet","callee":"cri-fake","code":"OK","request":{"config":{"metadata":{"name":"web","uid":"u1"}}},"response":{"podSandboxId":"sb-1"}}
{"seq":2,"time":"2026-01-02T03:04:06Z","interface":"CRI","service":"runtime.v1.RuntimeService","method":"StopPodSandbox","caller":"kubelet","callee":"cri-fake","code":"OK","request":{"podSandboxId":"sb-1"}}
{"seq":3,"time":"2026-01-02T03:04:07Z","interface":"CSI","service":"csi.v1.Controller","method":"CreateVolume","caller":"csi-provisioner","callee":"csi-fake","code":"AlreadyExists","request":{"name":"pvc-1","secrets":{"a":"***stripped***"}},"response":{"volume":{"volumeId":"v-1"}}}
`))
	f.Add([]byte(`{"interface":"CRI","method":"Version","code":"OK","request":"${x}","response":[{"id":"${y}"}]}`))
	f.Add([]byte(`{"interface":"CSI","service":"csi.v1.Node","method":"NodeGetInfo","caller":"x: y","code":"Weird"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := trace.Read(bytes.NewReader(data), "trace.jsonl")
		if err != nil || len(events) > 200 {
			return
		}
		out, _, err := Scenario(events, Options{Name: "fuzz"})
		if err != nil {
			return
		}
		if _, err := scenario.Parse(out, "replay.yaml"); err != nil {
			t.Fatalf("the replay of\n%s\ndoes not parse: %v\n%s", data, err, out)
		}
	})
}
