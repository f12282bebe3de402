package applets

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/kernel/ipcns"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// The System V IPC tools over the container's IPC namespace (kernel/ipc.go): busybox's
// ipcs, and util-linux's ipcmk (busybox has none; an image gets it through its behaviour's
// executables, e.g. {/usr/bin/ipcmk: ipcmk}).

// ipcmkSize parses util-linux's strtosize: a number with an optional K, M, G, T, P or E,
// followed by nothing or "iB" (powers of 1024) or "B" (powers of 1000).
func ipcmkSize(s string) (uint64, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, false
	}
	suffix := s[i:]
	if suffix == "" {
		return n, true
	}
	exp := strings.IndexByte("KMGTPE", suffix[0]&^0x20) + 1
	if exp == 0 {
		return 0, false
	}
	base := uint64(1024)
	switch suffix[1:] {
	case "", "iB":
	case "B":
		base = 1000
	default:
		return 0, false
	}
	for ; exp > 0; exp-- {
		if n > (1<<64-1)/base {
			return 0, false
		}
		n *= base
	}
	return n, true
}

// appletIpcmk is util-linux's ipcmk: -M SIZE makes a shared memory segment, -Q a message
// queue, -S N a set of N semaphores (any together), -p MODE their permissions (octal,
// default 0644); it prints each id ("Shared memory id: 0").
func appletIpcmk(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "MSp")
	if err != nil || len(args) > 0 {
		fmt.Fprintf(p.Stderr, "%s: bad usage\nTry '%s --help' for more information.\n", p.Name(), p.Name())
		return 1
	}
	mode := uint64(0o644)
	if v, ok := opts['p']; ok {
		if mode, err = strconv.ParseUint(v, 8, 32); err != nil {
			p.Errorf("failed to parse mode: '%s'", v)
			return 1
		}
	}
	type want struct {
		kind  ipcns.Kind
		size  uint64
		what  string
		label string
	}
	var todo []want
	if v, ok := opts['M']; ok {
		n, good := ipcmkSize(v)
		if !good {
			p.Errorf("failed to parse size: '%s'", v)
			return 1
		}
		todo = append(todo, want{ipcns.SharedMemory, n, "create share memory failed", "Shared memory id"})
	}
	if _, ok := opts['Q']; ok {
		todo = append(todo, want{ipcns.MessageQueue, 0, "create message queue failed", "Message queue id"})
	}
	if v, ok := opts['S']; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			p.Errorf("failed to parse elements: '%s'", v)
			return 1
		}
		todo = append(todo, want{ipcns.SemaphoreSet, n, "create semaphore failed", "Semaphore id"})
	}
	if len(todo) == 0 {
		fmt.Fprintf(p.Stderr, "%s: bad usage\nTry '%s --help' for more information.\n", p.Name(), p.Name())
		return 1
	}
	for _, w := range todo {
		// util-linux takes a random key for each object.
		key := int32(rand.Uint32()) | 1
		id, err := p.IPCGet(w.kind, key, w.size, uint32(mode))
		if err != nil {
			p.Errorf("%s: %s", w.what, vfs.Strerror(err))
			return 1
		}
		fmt.Fprintf(p.Stdout, "%s: %d\n", w.label, id)
	}
	return 0
}

// appletIpcs is busybox's ipcs in its default format: -q message queues, -m shared memory,
// -s semaphores, -a (or none) all three, in that order.
func appletIpcs(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "i")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) > 0 {
		p.Errorf("invalid argument '%s'", args[0])
		return 1
	}
	for c := range opts {
		if strings.IndexByte("aqsm", c) < 0 {
			p.Errorf("-%c is not simulated (only the default format: -a -q -m -s)", c)
			return 1
		}
	}
	all := opts['a'] != "" || (opts['q'] == "" && opts['m'] == "" && opts['s'] == "")
	var b strings.Builder
	owner := func(uid, width int) string {
		if name := userName(p, uid); name != "" {
			if len(name) > width {
				name = name[:width]
			}
			return fmt.Sprintf("%-10s", name)
		}
		return fmt.Sprintf("%-*d", width, uid)
	}
	b.WriteString("\n")
	if all || opts['q'] != "" {
		b.WriteString("------ Message Queues --------\n")
		fmt.Fprintf(&b, "%-10s %-10s %-10s %-10s %-12s %-12s\n", "key", "msqid", "owner", "perms", "used-bytes", "messages")
		for _, o := range p.IPCList(ipcns.MessageQueue) {
			fmt.Fprintf(&b, "0x%08x %-10d %s %-10o %-12d %-12d\n", uint32(o.Key), o.ID, owner(o.UID, 10), o.Mode, o.Size, o.Messages)
		}
		b.WriteString("\n")
	}
	if all || opts['m'] != "" {
		b.WriteString("------ Shared Memory Segments --------\n")
		fmt.Fprintf(&b, "%-10s %-10s %-10s %-10s %-10s %-10s %-12s\n", "key", "shmid", "owner", "perms", "bytes", "nattch", "status")
		for _, o := range p.IPCList(ipcns.SharedMemory) {
			fmt.Fprintf(&b, "0x%08x %-10d %s %-10o %-10d %-10d %-6s %-6s\n", uint32(o.Key), o.ID, owner(o.UID, 10), o.Mode, o.Size, 0, " ", " ")
		}
		b.WriteString("\n")
	}
	if all || opts['s'] != "" {
		b.WriteString("------ Semaphore Arrays --------\n")
		fmt.Fprintf(&b, "%-10s %-10s %-10s %-10s %-10s\n", "key", "semid", "owner", "perms", "nsems")
		for _, o := range p.IPCList(ipcns.SemaphoreSet) {
			fmt.Fprintf(&b, "0x%08x %-10d %s %-10o %-10d\n", uint32(o.Key), o.ID, owner(o.UID, 9), o.Mode, o.Size)
		}
		b.WriteString("\n")
	}
	if _, err := fmt.Fprint(p.Stdout, b.String()); err != nil {
		return 1
	}
	return 0
}
