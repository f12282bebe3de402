package netapplets

import (
	"io"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/plugsim/plugsim/cri-fake/process/resolv"
)

// FuzzDNSAnswer feeds hostile DNS messages (what a server answers dig, nslookup and getent) to
// the parts that read them: the record chase and dig's printing never panic and never loop.
func FuzzDNSAnswer(f *testing.F) {
	q, _ := resolv.NewQuery("kubernetes.default.svc.cluster.local.", dnsmessage.TypeA, true)
	q.Response = true
	q.Answers = append(q.Answers, dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: q.Questions[0].Name, Type: dnsmessage.TypeCNAME, Class: dnsmessage.ClassINET, TTL: 5},
		Body:   &dnsmessage.CNAMEResource{CNAME: q.Questions[0].Name},
	})
	seed, _ := q.Pack()
	f.Add(seed)
	f.Add([]byte{0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m dnsmessage.Message
		if m.Unpack(data) != nil {
			return
		}
		name := "x."
		if len(m.Questions) > 0 {
			name = m.Questions[0].Name.String()
		}
		a := resolv.Answer{Msg: &m, Server: "10.96.0.10", Port: 53, Name: name, Size: len(data)}
		for _, tp := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA, dnsmessage.TypeSRV, dnsmessage.TypePTR, dnsmessage.TypeCNAME} {
			resolv.Records(a, tp)
		}
		o, _ := parseDigArgs([]string{"x"})
		printDig(io.Discard, o, a, false)
		o.short = true
		printDig(io.Discard, o, a, false)
	})
}
