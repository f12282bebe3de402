package driver

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/csi-fake/state"
)

// TestCapacityArithmeticOverflow (issue 17): sizes near math.MaxInt64 never wrap around the
// capacity checks. Before the fix ControllerExpandVolume to MaxInt64 was accepted under a 1 TiB
// capacity (used - old + new wrapped negative), after which every CreateVolume failed with a
// negative "available", also after a restart since the size was saved.
func TestCapacityArithmeticOverflow(t *testing.T) {
	const tib = int64(1) << 40
	expand := func(d *Driver, id string, size int64) error {
		return call(d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: size}}))
	}
	t.Run("ControllerExpandVolume", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			size int64
			want codes.Code
		}{
			{"MaxInt64", math.MaxInt64, codes.OutOfRange},
			{"wraps by one", math.MaxInt64 - gib + 1, codes.OutOfRange},
			{"MaxInt64 minus the capacity", math.MaxInt64 - tib, codes.OutOfRange},
			{"one byte past the capacity", tib - gib + 1, codes.OutOfRange},
			{"exactly the capacity", tib - gib, codes.OK},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := newTestDriver(t, func(c *Config) { c.Capacity = tib })
				must(d.CreateVolume(ctx, createReq("a", gib)))(t)
				b := must(d.CreateVolume(ctx, createReq("b", gib)))(t).GetVolume().GetVolumeId()
				if err := expand(d, b, tc.size); status.Code(err) != tc.want {
					t.Fatalf("ControllerExpandVolume to %d: %v, want %s", tc.size, err, tc.want)
				}
				avail := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t).GetAvailableCapacity()
				want := tib - 2*gib
				if tc.want == codes.OK {
					want = 0
				}
				if avail != want {
					t.Errorf("GetCapacity %d after the expansion, want %d", avail, want)
				}
				_, err := d.CreateVolume(ctx, createReq("c", gib))
				if tc.want == codes.OK {
					if status.Code(err) != codes.ResourceExhausted {
						t.Errorf("CreateVolume with the pool full: %v, want ResourceExhausted", err)
					}
				} else if err != nil {
					t.Errorf("CreateVolume after a refused expansion: %v", err)
				}
			})
		}
	})

	// A state saved by a csi-fake before the fix (or edited by hand) holds sizes whose sum wraps:
	// the checks saturate instead, every answer is a clear refusal with no negative figure.
	t.Run("saved sizes that sum past MaxInt64", func(t *testing.T) {
		dir := t.TempDir()
		st, err := state.Open(filepath.Join(dir, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		d := newTestDriver(t, func(c *Config) { c.Capacity, c.Store = tib, st })
		a := must(d.CreateVolume(ctx, createReq("a", gib)))(t).GetVolume().GetVolumeId()
		b := must(d.CreateVolume(ctx, createReq("b", gib)))(t).GetVolume().GetVolumeId()
		if err := d.store.Update(func(s *state.Data) error {
			s.Volumes[a].CapacityBytes = math.MaxInt64
			s.Volumes[b].CapacityBytes = math.MaxInt64
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if avail := must(d.GetCapacity(ctx, &csi.GetCapacityRequest{}))(t).GetAvailableCapacity(); avail != 0 {
			t.Errorf("GetCapacity %d, want 0", avail)
		}
		for _, tc := range []struct {
			name string
			call func() error
			want codes.Code
		}{
			{"CreateVolume", func() error { return call(d.CreateVolume(ctx, createReq("c", 1))) }, codes.ResourceExhausted},
			{"CreateVolume MaxInt64", func() error { return call(d.CreateVolume(ctx, createReq("d", math.MaxInt64))) }, codes.ResourceExhausted},
			{"clone", func() error {
				r := createReq("e", math.MaxInt64)
				r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: a}}}
				return call(d.CreateVolume(ctx, r))
			}, codes.ResourceExhausted},
			{"ControllerExpandVolume", func() error { return expand(d, a, math.MaxInt64) }, codes.OK}, // already that size
		} {
			err := tc.call()
			if status.Code(err) != tc.want {
				t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
			}
			if err != nil && strings.Contains(status.Convert(err).Message(), " -") {
				t.Errorf("%s: the message has a negative figure: %v", tc.name, err)
			}
		}
	})
}
