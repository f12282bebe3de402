package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plugsim/plugsim/cni-fake/ipam"
	"github.com/plugsim/plugsim/internal/crashtest"
)

// TestKill9MidADD execs eight concurrent ADDs a round and kills some of them with SIGKILL at a
// random moment (before, while or after they hold the lease file's lock), as a runtime's timeout
// or an OOM kill would. After each round: the lease file still reads; every ADD that printed a
// result holds exactly the address it printed; no address is leased twice; a killed ADD left
// either no lease or one lease, which the DEL a runtime sends next removes; and the lock is free
// (the next round's ADDs finish).
func TestKill9MidADD(t *testing.T) {
	cycles := crashtest.Cycles(5)
	dir := t.TempDir()
	conf := testConf(dir, "1.1.0", map[string]any{"logFile": nil, "ipam": map[string]any{"type": "cni-fake",
		"ranges": [][]map[string]string{{{"subnet": "10.78.0.0/22"}}}}})
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	var killed, landed, answered int
	for cycle := range cycles {
		type result struct {
			id, ip string
			killed bool
		}
		results := make([]result, 8)
		var wg sync.WaitGroup
		for i := range results {
			id := fmt.Sprintf("c%d-%d", cycle, i)
			cmd := exec.Command(filepath.Join(binDir, "cni-fake"))
			cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=" + id, "CNI_NETNS=/var/run/netns/" + id, "CNI_IFNAME=eth0", "CNI_PATH=" + binDir}
			cmd.Stdin = strings.NewReader(conf)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			kill := rnd.IntN(2) == 0
			delay := time.Duration(rnd.IntN(20000)) * time.Microsecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				if kill {
					time.Sleep(delay)
					cmd.Process.Signal(syscall.SIGKILL)
				}
				err := cmd.Wait()
				r := result{id: id}
				if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
					r.killed = true
				} else if err == nil {
					var res struct {
						IPs []struct{ Address string } `json:"ips"`
					}
					if json.Unmarshal(out.Bytes(), &res) == nil && len(res.IPs) == 1 {
						r.ip = strings.Split(res.IPs[0].Address, "/")[0]
					}
				}
				results[i] = r
			}()
		}
		wg.Wait()
		s, err := ipam.Open(filepath.Join(dir, "data"), "testnet")
		if err != nil {
			t.Fatal(err)
		}
		leases, err := s.Leases()
		s.Close()
		if err != nil {
			t.Fatalf("round %d: the lease file does not read after kill -9: %v", cycle, err)
		}
		byIP, byID := map[string]string{}, map[string][]string{}
		for _, l := range leases {
			if other, dup := byIP[l.IP.String()]; dup {
				t.Fatalf("round %d: %s leased to %s and %s", cycle, l.IP, other, l.ContainerID)
			}
			byIP[l.IP.String()] = l.ContainerID
			byID[l.ContainerID] = append(byID[l.ContainerID], l.IP.String())
		}
		for _, r := range results {
			switch {
			case r.killed:
				killed++
				if len(byID[r.id]) > 0 {
					landed++ // killed after its lease was saved: the runtime's DEL frees it
				}
				if len(byID[r.id]) > 1 {
					t.Fatalf("round %d: killed %s holds %v", cycle, r.id, byID[r.id])
				}
			case r.ip != "":
				answered++
				if got := byID[r.id]; len(got) != 1 || got[0] != r.ip {
					t.Fatalf("round %d: %s was answered %s, the lease file holds %v", cycle, r.id, r.ip, got)
				}
			default:
				t.Fatalf("round %d: %s neither answered nor killed", cycle, r.id)
			}
		}
		// The runtime's DEL of every sandbox (killed ones included) frees everything.
		for _, r := range results {
			if o := run(t, call{cmd: "DEL", containerID: r.id, netns: "/var/run/netns/" + r.id, ifName: "eth0", stdin: conf}); o.err != nil {
				t.Fatalf("round %d: DEL %s: %v", cycle, r.id, o.err)
			}
		}
	}
	s, err := ipam.Open(filepath.Join(dir, "data"), "testnet")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if leases, err := s.Leases(); err != nil || len(leases) != 0 {
		t.Fatalf("after every DEL: %d leases, %v", len(leases), err)
	}
	t.Logf("%d rounds of 8 concurrent ADDs: %d answered and kept, %d killed (%d after saving their lease), no lease lost or doubled",
		cycles, answered, killed, landed)
}
