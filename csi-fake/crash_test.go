package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/plugsim/plugsim/internal/crashtest"
)

// TestKill9UnderLoad starts the csi-fake binary on a state directory, has four clients create
// (and delete) volumes concurrently, kills it with SIGKILL at a random moment, restarts it on the
// same directory and checks: it starts (no torn state file), every CreateVolume answered OK before
// the kill is there with the ID it was answered, a volume deleted with an OK answer is gone, and
// no name is held by two volumes. Rounds: 3 in `go test`, PLUGSIM_CRASH_CYCLES in `make soak`.
func TestKill9UnderLoad(t *testing.T) {
	cycles := crashtest.Cycles(3)
	bin := crashtest.Build(t, "csi-fake")
	dir := t.TempDir()
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "csi.sock")
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	created := map[string]string{} // name → volume ID answered OK
	deleted := map[string]bool{}   // volume IDs whose DeleteVolume was answered OK
	unsure := map[string]bool{}    // volume IDs whose DeleteVolume was cut by the kill: either state is right
	var mu sync.Mutex
	mount := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}
	var calls int
	for cycle := range cycles + 1 {
		os.Remove(sock)
		cmd := exec.Command(bin, "--endpoint", "unix://"+sock, "--state-dir", state, "--node-id", "n1", "--capacity", "1Pi")
		out, _ := os.Create(filepath.Join(dir, fmt.Sprintf("csi-fake.%d.log", cycle)))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctl := csi.NewControllerClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		// Up, and everything answered OK before the last kill is there.
		var list *csi.ListVolumesResponse
		for {
			list, err = ctl.ListVolumes(ctx, &csi.ListVolumesRequest{}, grpc.WaitForReady(true))
			if err == nil || ctx.Err() != nil {
				break
			}
			if cmd.ProcessState != nil {
				break
			}
		}
		if err != nil {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("round %d: restarted csi-fake does not answer: %v\n%s", cycle, err, b)
		}
		have := map[string]bool{}
		for _, e := range list.Entries {
			if have[e.Volume.VolumeId] {
				t.Fatalf("round %d: volume %s listed twice", cycle, e.Volume.VolumeId)
			}
			have[e.Volume.VolumeId] = true
		}
		for name, id := range created {
			if unsure[id] {
				if have[id] {
					delete(unsure, id)
				} else {
					deleted[id] = true
				}
				continue
			}
			if !deleted[id] && !have[id] {
				t.Fatalf("round %d: volume %s (%s) was created with an OK answer and is gone after kill -9", cycle, id, name)
			}
			if deleted[id] && have[id] {
				t.Fatalf("round %d: volume %s was deleted with an OK answer and is back", cycle, id)
			}
			// CreateVolume again with the same name is the same volume (idempotent), never a second one.
			// Every volume of the round just killed is asked again, and a random sample of the older
			// ones: asking all of them makes the rounds quadratic (300 rounds took over an hour).
			lastRound := strings.HasPrefix(name, fmt.Sprintf("pvc-%d-", cycle-1))
			if !deleted[id] && (lastRound || rnd.IntN(len(created)) < 32) {
				r, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{mount}})
				if err != nil || r.Volume.VolumeId != id {
					t.Fatalf("round %d: CreateVolume %s again: %v %v, want %s", cycle, name, r, err, id)
				}
			}
		}
		if cycle == cycles {
			cancel()
			conn.Close()
			cmd.Process.Kill()
			cmd.Wait()
			break
		}
		// Load, then kill -9 at a random moment.
		crashtest.KillUnderLoad(4, rnd, func() { cmd.Process.Kill(); cmd.Wait() }, func(c, i int) bool {
			name := fmt.Sprintf("pvc-%d-%d-%d", cycle, c, i)
			r, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{mount},
				CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
			if err != nil {
				return false // the server is gone
			}
			mu.Lock()
			created[name] = r.Volume.VolumeId
			calls++
			mu.Unlock()
			if i%3 == 0 {
				_, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: r.Volume.VolumeId})
				mu.Lock()
				if err == nil {
					deleted[r.Volume.VolumeId] = true
				} else {
					unsure[r.Volume.VolumeId] = true
				}
				mu.Unlock()
			}
			return true
		})
		cancel()
		conn.Close()
	}
	t.Logf("%d kill -9 rounds under 4 concurrent clients: %d volumes created with an OK answer, all there after each restart", cycles, len(created))
}
