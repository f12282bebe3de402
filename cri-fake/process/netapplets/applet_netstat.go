package netapplets

import (
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
)

// procNetAddr decodes "0100007F:1F90" (and the 32-hex-digit IPv6 form).
func procNetAddr(s string) string {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	port, _ := strconv.ParseUint(hexPort, 16, 16)
	raw, err := hex.DecodeString(hexIP)
	if err != nil {
		return s
	}
	// The kernel prints each 32-bit word in host (little-endian) order.
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	ip := net.IP(raw)
	if ip.To4() == nil && len(raw) == 16 {
		return fmt.Sprintf("[%s]:%d", ip, port)
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

var tcpStates = map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}

// Netstat lists sockets of the container's network namespace from the
// real /proc/net tables (-l listening only, -t tcp, -u udp; -n is implied).
// With a runtime-provided Listen function there is no kernel namespace to
// read, so only the simulated servers' ports would be known; that case
// prints the header only.
func Netstat(p *kernel.Proc) int {
	opts, _, _ := libbb.Flags(p.Args[1:], "")
	listening := opts['l'] != ""
	tcp, udp := opts['t'] != "", opts['u'] != ""
	if !tcp && !udp {
		tcp, udp = true, true
	}
	if listening {
		fmt.Fprintln(p.Stdout, "Active Internet connections (only servers)")
	} else {
		fmt.Fprintln(p.Stdout, "Active Internet connections (w/o servers)")
	}
	fmt.Fprintf(p.Stdout, "%-5s %6s %6s %-23s %-23s %-12s\n", "Proto", "Recv-Q", "Send-Q", "Local Address", "Foreign Address", "State")
	if !p.KernelNetwork() {
		return 0
	}
	var files [][2]string
	if tcp {
		files = append(files, [2]string{"tcp", "tcp"}, [2]string{"tcp6", "tcp"})
	}
	if udp {
		files = append(files, [2]string{"udp", "udp"}, [2]string{"udp6", "udp"})
	}
	for _, f := range files {
		data, err := p.ReadProcNet(f[0])
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fl := strings.Fields(line)
			if len(fl) < 4 {
				continue
			}
			state := tcpStates[fl[3]]
			isListen := state == "LISTEN" || (f[1] == "udp" && fl[3] == "07")
			if listening != isListen {
				continue
			}
			if f[1] == "udp" {
				state = ""
			}
			proto := f[1]
			if strings.HasSuffix(f[0], "6") {
				proto += "6"
			}
			remote := procNetAddr(fl[2])
			if strings.HasSuffix(remote, ":0") {
				remote = strings.TrimSuffix(remote, "0") + "*"
			}
			fmt.Fprintf(p.Stdout, "%-5s %6d %6d %-23s %-23s %-12s\n", proto, 0, 0, procNetAddr(fl[1]), remote, state)
		}
	}
	return 0
}
