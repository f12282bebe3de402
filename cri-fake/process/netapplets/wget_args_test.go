package netapplets

import (
	"testing"
	"time"
)

// TestWgetHugeTimeout (issue 17): a -T past what a Duration holds is no timeout, as -T 0 is,
// never a wrapped negative (an immediate timeout) or short one.
func TestWgetHugeTimeout(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{
		{"-T0", 0},
		{"-T5", 5 * time.Second},
		{"-T9223372036", 9223372036 * time.Second},
		{"-T9223372037", 0},
		{"-T18446744074", 0},
		{"--timeout=9223372036854775807", 0},
	} {
		o, err := parseWgetArgs([]string{tc.arg, "http://127.0.0.1:1/"})
		if err != nil || o.timeout != tc.want {
			t.Errorf("wget %s: timeout %v, %v; want %v", tc.arg, o.timeout, err, tc.want)
		}
	}
}
