package fakeserver

import (
	"flag"
	"fmt"
	"os"
	"strconv"
)

// Flags are the serving flags cri-fake and csi-fake both have; Register adds them to a flag set
// with their defaults, and the command copies them into its server's options.
type Flags struct {
	FaultSeed       uint64
	SocketMode      os.FileMode
	AdminSocketMode os.FileMode
	SocketGroup     string
}

// Register adds --fault-seed, --socket-mode, --admin-socket-mode and --socket-group to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	f.SocketMode, f.AdminSocketMode = DefaultSocketMode, DefaultAdminSocketMode
	fs.Uint64Var(&f.FaultSeed, "fault-seed", 0, "seed of the fault rules' random choices (rules with a probability); 0 takes the --faults file's seed, else a random one. The seed is logged at start and recorded in the trace event of every faulted call (attrs.faultSeed): give it here to repeat a run")
	fs.Var(modeValue{&f.SocketMode}, "socket-mode", "`mode` (octal) of the sockets served; the owner and --socket-group may connect")
	fs.Var(modeValue{&f.AdminSocketMode}, "admin-socket-mode", "`mode` (octal) of the --admin-socket; it can change what the fake does")
	fs.StringVar(&f.SocketGroup, "socket-group", "", "`group` (name or number) that owns the sockets and the admin socket; default the process's group")
}

// modeValue is a file mode flag, written in octal.
type modeValue struct{ m *os.FileMode }

func (v modeValue) String() string {
	if v.m == nil {
		return ""
	}
	return fmt.Sprintf("%#o", uint32(*v.m))
}

func (v modeValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n == 0 || n > 0o777 {
		return fmt.Errorf("%q is not a permission mode: want octal, 0001 to 0777 (such as 0660)", s)
	}
	*v.m = os.FileMode(n)
	return nil
}
