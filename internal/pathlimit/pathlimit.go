// Package pathlimit checks a host path a client sent against Linux's limits on a path (PATH_MAX)
// and on one name in it (NAME_MAX), so that a fake refuses it with the reason where it is sent
// rather than meeting the kernel's ENAMETOOLONG later, halfway through making it.
package pathlimit

import (
	"fmt"
	"strings"
)

const (
	// MaxPath is PATH_MAX, which counts the final NUL: a path has at most MaxPath-1 bytes.
	MaxPath = 4096
	// MaxName is NAME_MAX, the bytes of one name between slashes.
	MaxName = 255
)

// Check returns an error naming the limit p is over, or nil.
func Check(p string) error {
	if len(p) >= MaxPath {
		return fmt.Errorf("%d bytes, over PATH_MAX (%d)", len(p), MaxPath)
	}
	for c := range strings.SplitSeq(p, "/") {
		if len(c) > MaxName {
			return fmt.Errorf("the name %.20q... is %d bytes, over NAME_MAX (%d)", c, len(c), MaxName)
		}
	}
	return nil
}
