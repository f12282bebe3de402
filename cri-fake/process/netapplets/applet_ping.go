package netapplets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// Ping is busybox ping: echo requests over a raw ICMP socket
// (kernel.Proc.OpenICMP), so without CAP_NET_RAW it prints its banner and
// then "ping: permission denied (are you root?)", exit 1, as busybox does
// (it has no unprivileged SOCK_DGRAM fallback, whatever
// net.ipv4.ping_group_range says). Options: -c COUNT, -s SIZE, -W SECS (wait
// for each reply), -w SECS (deadline), -i SECS (interval), -q, -4. The host
// is an IP literal or localhost (no resolver, as with wget). It ends after
// COUNT replies or timeouts, at the deadline, or on SIGINT, then prints the
// statistics; exit 0 when a reply came, 1 otherwise.
func Ping(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "cswWiItp")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) != 1 {
		p.Errorf("usage: ping [-c COUNT] [-s SIZE] [-W SECS] [-w SECS] [-i SECS] [-q] HOST")
		return 1
	}
	host := args[0]
	ip := net.ParseIP(host)
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil {
		p.Errorf("bad address '%s'", host)
		return 1
	}
	num := func(k byte, def float64) (float64, bool) {
		s, ok := opts[k]
		if !ok {
			return def, true
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v > 1e9 {
			p.Errorf("invalid number '%s'", s)
			return 0, false
		}
		return v, true
	}
	count, ok1 := num('c', 0)
	size, ok2 := num('s', 56)
	wait, ok3 := num('W', 10)
	deadline, ok4 := num('w', 0)
	interval, ok5 := num('i', 1)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || size > 65500 {
		if size > 65500 {
			p.Errorf("packet size %v is too large", size)
		}
		return 1
	}
	dotted := ip.String()
	fmt.Fprintf(p.Stdout, "PING %s (%s): %d data bytes\n", host, dotted, int(size))
	sock, err := p.OpenICMP(ip)
	if errors.Is(err, syscall.EPERM) {
		p.Errorf("permission denied (are you root?)")
		return 1
	}
	if err != nil {
		p.Errorf("sendto: %s", vfs.Strerror(err))
		return 1
	}
	defer sock.Close()

	ctx, stop := context.WithCancel(p.Ctx())
	defer stop()
	p.SetSignalHandler(func(sig syscall.Signal) bool {
		if sig == syscall.SIGINT {
			stop() // ^C: print the statistics and end, as ping does
			return true
		}
		return false
	})
	defer p.SetSignalHandler(nil)
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, secs(deadline))
		defer cancel()
	}
	var sent, received int
	var minRTT, maxRTT, sumRTT time.Duration
	for seq := 0; count == 0 || seq < int(count); seq++ {
		if ctx.Err() != nil {
			break
		}
		sent++
		ttl, rtt, err := sock.Echo(ctx, seq, int(size), secs(wait))
		switch {
		case err == nil:
			received++
			if received == 1 || rtt < minRTT {
				minRTT = rtt
			}
			maxRTT = max(maxRTT, rtt)
			sumRTT += rtt
			if opts['q'] == "" {
				fmt.Fprintf(p.Stdout, "%d bytes from %s: seq=%d ttl=%d time=%s ms\n", int(size)+8, dotted, seq, ttl, ms(rtt))
			}
		case errors.Is(err, kernel.ErrNoReply), ctx.Err() != nil:
		default:
			p.Errorf("sendto: %s", vfs.Strerror(err))
			return 1
		}
		if count != 0 && seq+1 >= int(count) {
			break
		}
		t := time.NewTimer(secs(interval))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if err := p.Ctx().Err(); err != nil {
		return 1 // killed: the statistics are not printed
	}
	fmt.Fprintf(p.Stdout, "\n--- %s ping statistics ---\n", host)
	loss := 0
	if sent > 0 {
		loss = (sent - received) * 100 / sent
	}
	fmt.Fprintf(p.Stdout, "%d packets transmitted, %d packets received, %d%% packet loss\n", sent, received, loss)
	if received > 0 {
		fmt.Fprintf(p.Stdout, "round-trip min/avg/max = %s/%s/%s ms\n", ms(minRTT), ms(sumRTT/time.Duration(received)), ms(maxRTT))
		return 0
	}
	return 1
}

func secs(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// ms formats a round trip as ping does: milliseconds with three decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}
