package resolv

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// typeNames are the record types by their master-file names (RFC 1035, 2782, 3596, 6891).
var typeNames = map[string]dnsmessage.Type{
	"A": dnsmessage.TypeA, "NS": dnsmessage.TypeNS, "CNAME": dnsmessage.TypeCNAME, "SOA": dnsmessage.TypeSOA,
	"PTR": dnsmessage.TypePTR, "MX": dnsmessage.TypeMX, "TXT": dnsmessage.TypeTXT, "AAAA": dnsmessage.TypeAAAA,
	"SRV": dnsmessage.TypeSRV, "OPT": dnsmessage.TypeOPT, "ANY": dnsmessage.TypeALL, "HINFO": dnsmessage.TypeHINFO,
	"SVCB": dnsmessage.TypeSVCB, "HTTPS": dnsmessage.TypeHTTPS, "CAA": 257,
}

// ParseType is the type a master-file name (any case) or TYPEnnn names.
func ParseType(s string) (dnsmessage.Type, bool) {
	u := strings.ToUpper(s)
	if t, ok := typeNames[u]; ok {
		return t, true
	}
	if n, ok := strings.CutPrefix(u, "TYPE"); ok {
		if v, err := strconv.ParseUint(n, 10, 16); err == nil {
			return dnsmessage.Type(v), true
		}
	}
	return 0, false
}

// TypeString is t's master-file name, TYPEnnn when it has none (RFC 3597).
func TypeString(t dnsmessage.Type) string {
	for n, v := range typeNames {
		if v == t && n != "ANY" {
			return n
		}
	}
	if t == dnsmessage.TypeALL {
		return "ANY"
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// ClassString is c's master-file name (IN, CH, HS), CLASSnnn otherwise.
func ClassString(c dnsmessage.Class) string {
	switch c {
	case dnsmessage.ClassINET:
		return "IN"
	case dnsmessage.ClassCHAOS:
		return "CH"
	case dnsmessage.ClassHESIOD:
		return "HS"
	case dnsmessage.ClassANY:
		return "ANY"
	}
	return "CLASS" + strconv.Itoa(int(c))
}

// RcodeString is an rcode as dig prints it in its header line.
func RcodeString(r dnsmessage.RCode) string {
	switch r {
	case dnsmessage.RCodeSuccess:
		return "NOERROR"
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	}
	return "RESERVED" + strconv.Itoa(int(r))
}

// RData is a record's data in master-file form, as BIND prints it (dig +short prints only this).
func RData(rr dnsmessage.Resource) string {
	switch b := rr.Body.(type) {
	case *dnsmessage.AResource:
		return netip.AddrFrom4(b.A).String()
	case *dnsmessage.AAAAResource:
		return netip.AddrFrom16(b.AAAA).String()
	case *dnsmessage.CNAMEResource:
		return b.CNAME.String()
	case *dnsmessage.NSResource:
		return b.NS.String()
	case *dnsmessage.PTRResource:
		return b.PTR.String()
	case *dnsmessage.MXResource:
		return fmt.Sprintf("%d %s", b.Pref, b.MX.String())
	case *dnsmessage.SRVResource:
		return fmt.Sprintf("%d %d %d %s", b.Priority, b.Weight, b.Port, b.Target.String())
	case *dnsmessage.SOAResource:
		return fmt.Sprintf("%s %s %d %d %d %d %d", b.NS.String(), b.MBox.String(), b.Serial, b.Refresh, b.Retry, b.Expire, b.MinTTL)
	case *dnsmessage.TXTResource:
		q := make([]string, len(b.TXT))
		for i, t := range b.TXT {
			q[i] = quoteTXT(t)
		}
		return strings.Join(q, " ")
	case *dnsmessage.UnknownResource:
		if len(b.Data) == 0 {
			return `\# 0`
		}
		return fmt.Sprintf(`\# %d %s`, len(b.Data), strings.ToUpper(hex.EncodeToString(b.Data)))
	}
	return ""
}

// quoteTXT is a character-string in master-file form: quoted, with " and \ escaped and other
// non-printable bytes as \DDD.
func quoteTXT(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// RRLine is a record as dig prints it in a section: name, TTL, class, type and data, in BIND's
// columns (each field starts at the next of columns 24, 32, 40 and 48, reached with tabs, or
// after one space when the field before runs past it).
func RRLine(rr dnsmessage.Resource) string {
	var b strings.Builder
	col := 0
	write := func(s string) {
		b.WriteString(s)
		col += len(s)
	}
	to := func(target int) {
		if col >= target {
			write(" ")
			return
		}
		for col < target {
			b.WriteByte('\t')
			col = (col/8 + 1) * 8
		}
	}
	write(rr.Header.Name.String())
	to(24)
	write(strconv.FormatUint(uint64(rr.Header.TTL), 10))
	to(32)
	write(ClassString(rr.Header.Class))
	to(40)
	write(TypeString(rr.Header.Type))
	to(48)
	write(RData(rr))
	return b.String()
}
