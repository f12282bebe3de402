// Package callfuzz holds what the call-sequence fuzz targets of cri-fake and csi-fake (FuzzCRI,
// FuzzCSI) share: a fuzzed program read a byte at a time, which picks each call, its target among
// the IDs handed out so far or the fuzzed name, and its fresh names; and the check that an error
// is a gRPC status with one of the codes the fake documents.
package callfuzz

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Program is a fuzzed call sequence.
type Program struct {
	// Prog is what is left of the program; each call reads the bytes it needs from it.
	Prog []byte
	// Name is the fuzzed name (a hostile ID, a prefix, an empty string) Pick and Str hand out.
	Name string
	seq  int
}

// WireString is s as a client can send it in a proto3 string field: valid UTF-8, each invalid
// byte replaced by U+FFFD. grpc-go refuses to marshal any other string ("string field contains
// invalid UTF-8", Internal, on the client's side), so a server never receives one; a fuzzed
// string given to a call as it is would fail in the client, not test the fake.
func WireString(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// More reports whether any of the program is left.
func (p *Program) More() bool { return len(p.Prog) > 0 }

// Next is the program's next byte (0 once it is used up).
func (p *Program) Next() byte {
	if len(p.Prog) == 0 {
		return 0
	}
	b := p.Prog[0]
	p.Prog = p.Prog[1:]
	return b
}

// Pick is one of ids, or the fuzzed name.
func (p *Program) Pick(ids []string) string {
	b := int(p.Next())
	if len(ids) == 0 || b%(len(ids)+1) == len(ids) {
		return p.Name
	}
	return ids[b%(len(ids)+1)]
}

// Str is the fuzzed name one time in four, else a fresh ordinary one.
func (p *Program) Str() string {
	if p.Next()%4 == 0 {
		return p.Name
	}
	p.seq++
	return fmt.Sprintf("n%d", p.seq)
}

// Check fails t unless err is nil or a gRPC status with one of the documented codes.
func Check(t testing.TB, method string, err error, documented map[codes.Code]bool) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%s: error %v is not a gRPC status", method, err)
	}
	if !documented[st.Code()] {
		t.Fatalf("%s: code %s (%s) is not one the fake documents for this call", method, st.Code(), st.Message())
	}
}
