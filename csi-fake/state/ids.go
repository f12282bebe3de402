package state

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxIDBytes is the longest volume, snapshot or group snapshot ID csi-fake accepts: the CSI spec's
// general size limit for a string field ("Size Limits": 128 bytes), which these IDs do not
// override. Kubelet's IDs for inline ephemeral volumes ("csi-" and a SHA-256 in hex) are 68 bytes.
const MaxIDBytes = 128

// CheckID says why id cannot be a volume, snapshot or group snapshot ID, or returns nil.
//
// An ID names its data, <data-dir>/volumes/<id> or <data-dir>/snapshots/<id>, and a node process
// adopts IDs it has never seen (a volume created by another process, kubelet's ephemeral IDs). So
// an ID must be exactly one path component that stays in that directory: not empty, not "." or
// "..", no '/', no NUL. Control characters are refused too (the spec bans them from names; in a
// file name they garble logs and listings), and the length is bounded by the spec's limit. IDs
// csi-fake generates ("vol-", "snap-", "group-" and 16 hex digits) always pass; so do csi-sanity's
// ("fake-vol-id-…", "none-exist-id").
func CheckID(id string) error {
	switch {
	case id == "":
		return errors.New("is empty")
	case len(id) > MaxIDBytes:
		return fmt.Errorf("is %d bytes long; the CSI spec limits a string field to %d bytes", len(id), MaxIDBytes)
	case id == "." || id == "..":
		return errors.New("names a directory, not a volume or snapshot")
	case !utf8.ValidString(id):
		return errors.New("is not valid UTF-8")
	}
	for i, r := range id {
		switch {
		case r == '/':
			return fmt.Errorf("contains '/' at byte %d: an ID is one file name under the data directory", i)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Errorf("contains the control character %U at byte %d", r, i)
		}
	}
	return nil
}

// QuoteID quotes an ID for an error message, cut to 64 bytes: a refused ID may be megabytes long.
func QuoteID(id string) string {
	const max = 64
	if len(id) <= max {
		return strconv.Quote(id)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return strconv.Quote(id[:cut]) + fmt.Sprintf("… (%d bytes)", len(id))
}

// checkIDs checks every ID a state file holds, so that a file edited by hand (or by anyone who
// can write the state directory) cannot make csi-fake work on paths outside its data directory.
func (d *Data) checkIDs() error {
	bad := func(kind, id string, err error) error {
		return fmt.Errorf("%s ID %s %v", kind, QuoteID(id), err)
	}
	for id, v := range d.Volumes {
		if err := CheckID(id); err != nil {
			return bad("volume", id, err)
		}
		if v == nil || v.ID != id {
			return fmt.Errorf("volume %s: the record under this key has another ID", QuoteID(id))
		}
	}
	for id, s := range d.Snapshots {
		if err := CheckID(id); err != nil {
			return bad("snapshot", id, err)
		}
		if s == nil || s.ID != id {
			return fmt.Errorf("snapshot %s: the record under this key has another ID", QuoteID(id))
		}
	}
	for id, g := range d.GroupSnapshots {
		if err := CheckID(id); err != nil {
			return bad("group snapshot", id, err)
		}
		if g == nil || g.ID != id {
			return fmt.Errorf("group snapshot %s: the record under this key has another ID", QuoteID(id))
		}
		for _, sid := range g.SnapshotIDs {
			if err := CheckID(sid); err != nil {
				return bad("group snapshot "+id+": snapshot", sid, err)
			}
		}
	}
	for id, nv := range d.Node {
		if err := CheckID(id); err != nil {
			return bad("node volume", id, err)
		}
		if nv == nil || nv.VolumeID != id {
			return fmt.Errorf("node volume %s: the record under this key has another ID", QuoteID(id))
		}
	}
	return nil
}
