package netapplets

import (
	"fmt"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// Brctl is busybox brctl's bridge subcommands: addbr, delbr, show. The
// bridges are the simulation's network devices (kernel.Proc.LinkAdd), so
// addbr and delbr need CAP_NET_ADMIN and fail as brctl's ioctl does without
// it: "brctl: bridge foobar: Operation not permitted".
func Brctl(p *kernel.Proc) int {
	args := p.Args[1:]
	if len(args) == 0 {
		p.Errorf("usage: brctl COMMAND [BRIDGE [INTERFACE]]")
		return 1
	}
	switch args[0] {
	case "addbr", "delbr":
		if len(args) != 2 {
			p.Errorf("usage: brctl %s BRIDGE", args[0])
			return 1
		}
		var err error
		if args[0] == "addbr" {
			err = p.LinkAdd(args[1], "bridge")
		} else {
			err = p.LinkDel(args[1])
		}
		if err != nil {
			p.Errorf("bridge %s: %s", args[1], vfs.Strerror(err))
			return 1
		}
		return 0
	case "show":
		fmt.Fprintln(p.Stdout, "bridge name\tbridge id\t\tSTP enabled\tinterfaces")
		for _, l := range p.Links() {
			if l.Kind == "bridge" && (len(args) == 1 || l.Name == args[1]) {
				fmt.Fprintf(p.Stdout, "%s\t\t8000.000000000000\tno\n", l.Name)
			}
		}
		return 0
	}
	p.Errorf("brctl %s: not simulated (addbr, delbr and show are)", args[0])
	return 1
}

// IP is busybox ip's `link` object: `ip link [show]`, `ip link add
// [name] NAME type KIND`, `ip link del[ete] [dev] NAME`. Adding and deleting
// need CAP_NET_ADMIN; rtnetlink's refusal is printed as ip prints it:
// "ip: RTNETLINK answers: Operation not permitted", exit 2.
func IP(p *kernel.Proc) int {
	args := p.Args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		args = args[1:] // -4, -6, -o: nothing they change is simulated
	}
	if len(args) == 0 {
		p.Errorf("usage: ip OBJECT { COMMAND }; only `ip link` is simulated")
		return 1
	}
	if obj := args[0]; obj != "link" && obj != "l" && obj != "li" {
		p.Errorf("%s: not simulated (only `ip link` is)", obj)
		return 1
	}
	args = args[1:]
	cmd := "show"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "show", "list", "ls", "lst":
		for i, l := range p.Links() {
			if len(args) > 0 && args[len(args)-1] != l.Name {
				continue
			}
			flags, kind := "<BROADCAST,MULTICAST,UP,LOWER_UP>", l.Kind
			switch {
			case l.Name == "lo":
				flags = "<LOOPBACK,UP,LOWER_UP>"
			case l.Kind != "":
				flags = "<BROADCAST,MULTICAST>" // added devices start down
			}
			fmt.Fprintf(p.Stdout, "%d: %s: %s", i+1, l.Name, flags)
			if kind != "" {
				fmt.Fprintf(p.Stdout, " (%s)", kind)
			}
			fmt.Fprintln(p.Stdout)
		}
		return 0
	case "add", "a":
		name, kind := "", ""
		for i := 0; i < len(args); i++ {
			switch a := args[i]; {
			case (a == "name" || a == "dev" || a == "type") && i+1 < len(args):
				if a == "type" {
					kind = args[i+1]
				} else {
					name = args[i+1]
				}
				i++
			case name == "":
				name = a
			}
		}
		if name == "" || kind == "" {
			p.Errorf("link add: NAME and type KIND are required")
			return 1
		}
		return rtnetlink(p, p.LinkAdd(name, kind))
	case "delete", "del", "d":
		name := ""
		for _, a := range args {
			if a != "dev" {
				name = a
			}
		}
		if name == "" {
			p.Errorf("link delete: NAME is required")
			return 1
		}
		return rtnetlink(p, p.LinkDel(name))
	}
	p.Errorf("link %s: not simulated (show, add and delete are)", cmd)
	return 1
}

// rtnetlink reports the kernel's answer to a link request as ip does.
func rtnetlink(p *kernel.Proc, err error) int {
	if err != nil {
		p.Errorf("RTNETLINK answers: %s", vfs.Strerror(err))
		return 2
	}
	return 0
}
