// Package seccomp is the simulation's seccomp: the OCI profile a container's runtime is handed
// (runtime-spec's LinuxSeccomp, the JSON containerd reads for a Localhost profile), checked the
// way runc checks it before it loads a filter, compiled into a Filter, and the verdict that
// filter gives a system call by name and arguments. The kernel (package kernel) asks for a
// verdict in each of its simulated system calls; this package knows nothing of processes.
//
// The model follows runc (libcontainer/specconv.SetupSeccomp, libcontainer/seccomp.InitSeccomp)
// and the kernel (seccomp(2)):
//   - a profile with neither a default action nor rules installs no filter;
//   - unknown actions, operators, architectures and flags are refused with runc's words;
//   - a rule whose action and return code equal the default's is dropped (runc skips it);
//   - a syscall name the simulation never makes is ignored, as libseccomp ignores a name it
//     cannot resolve;
//   - the conditions of a rule are ANDed, except that conditions repeating an argument index
//     each become a rule of their own (runc's fallback, so they OR);
//   - SCMP_ACT_ERRNO returns errnoRet (EPERM when unset) truncated to 16 bits and capped at
//     4095 (MAX_ERRNO), and with 0 the call is skipped and "succeeds"; SCMP_ACT_TRACE with no
//     tracer attached fails the call with ENOSYS; SCMP_ACT_TRAP sends SIGSYS; the KILL actions
//     end the process with SIGSYS.
//
// Where the model stops: when several rules for one syscall match, the verdict is the most
// restrictive of them in the kernel's precedence order (KILL_PROCESS, KILL_THREAD, TRAP,
// ERRNO, TRACE, LOG, ALLOW), where libseccomp's decision tree may order them otherwise; an
// argument the simulation has no value for (a pointer, a file descriptor) never satisfies a
// condition; SCMP_ACT_NOTIFY is refused (there is no seccomp agent).
package seccomp

import (
	"errors"
	"fmt"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Action is what a filter does with a system call, ordered by the kernel's precedence: of two
// verdicts the greater wins.
type Action uint8

const (
	// Allow lets the call run (SCMP_ACT_ALLOW).
	Allow Action = iota
	// Log lets it run and would log it (SCMP_ACT_LOG); the simulation only lets it run.
	Log
	// Trace hands it to a tracer (SCMP_ACT_TRACE); with none attached it fails with ENOSYS.
	Trace
	// Errno fails it with Verdict.Errno without running it (SCMP_ACT_ERRNO).
	Errno
	// Trap sends SIGSYS to the caller (SCMP_ACT_TRAP).
	Trap
	// KillThread ends the calling thread with SIGSYS (SCMP_ACT_KILL, SCMP_ACT_KILL_THREAD);
	// a simulated process has one thread, so the process ends.
	KillThread
	// KillProcess ends the process with SIGSYS (SCMP_ACT_KILL_PROCESS).
	KillProcess
)

// actions maps the profile's names to actions: runc's table (libcontainer/seccomp/config.go),
// without SCMP_ACT_NOTIFY, which Compile refuses.
var actions = map[specs.LinuxSeccompAction]Action{
	specs.ActKill:        KillThread,
	specs.ActKillThread:  KillThread,
	specs.ActKillProcess: KillProcess,
	specs.ActTrap:        Trap,
	specs.ActErrno:       Errno,
	specs.ActTrace:       Trace,
	specs.ActLog:         Log,
	specs.ActAllow:       Allow,
}

// archs are the architecture names runc accepts (libcontainer/seccomp/config.go).
var archs = map[specs.Arch]bool{
	specs.ArchX86: true, specs.ArchX86_64: true, specs.ArchX32: true, specs.ArchARM: true,
	specs.ArchAARCH64: true, specs.ArchMIPS: true, specs.ArchMIPS64: true, specs.ArchMIPS64N32: true,
	specs.ArchMIPSEL: true, specs.ArchMIPSEL64: true, specs.ArchMIPSEL64N32: true, specs.ArchPPC: true,
	specs.ArchPPC64: true, specs.ArchPPC64LE: true, specs.ArchRISCV64: true, specs.ArchS390: true,
	specs.ArchS390X: true, specs.ArchLOONGARCH64: true,
}

// flags are the filter flags runc knows (SECCOMP_FILTER_FLAG_TSYNC is recognised and ignored
// by runc; none changes a verdict).
var flags = map[specs.LinuxSeccompFlag]bool{
	"SECCOMP_FILTER_FLAG_TSYNC": true, specs.LinuxSeccompFlagSpecAllow: true,
	specs.LinuxSeccompFlagLog: true, specs.LinuxSeccompFlagWaitKillableRecv: true,
}

// maxArgs is how many arguments a Linux system call has at most.
const maxArgs = 6

// maxErrno is the largest errno a filter can return (the kernel's MAX_ERRNO).
const maxErrno = 4095

// Verdict is what a filter decided for one call.
type Verdict struct {
	Action Action
	// Errno is what the call returns with Errno (0: the call is skipped and returns success).
	Errno syscall.Errno
	// data is the rule's 16-bit return code, kept to tell rules apart as libseccomp does.
	data uint16
}

// Arg is one argument of a system call: Known is false for one the simulation has no value
// for (a pointer into the caller's memory, a file descriptor).
type Arg struct {
	Value uint64
	Known bool
}

// Value is a known argument.
func Value(v uint64) Arg { return Arg{Value: v, Known: true} }

// Unknown is an argument the simulation has no value for.
var Unknown = Arg{}

type op uint8

const (
	opNE op = iota
	opLT
	opLE
	opEQ
	opGE
	opGT
	opMaskedEQ
)

// operators maps the profile's names to comparisons (runc's table).
var operators = map[specs.LinuxSeccompOperator]op{
	specs.OpNotEqual: opNE, specs.OpLessThan: opLT, specs.OpLessEqual: opLE, specs.OpEqualTo: opEQ,
	specs.OpGreaterEqual: opGE, specs.OpGreaterThan: opGT, specs.OpMaskedEqual: opMaskedEQ,
}

type condition struct {
	index         uint8
	op            op
	value, value2 uint64
}

func (c condition) holds(args []Arg) bool {
	if int(c.index) >= len(args) || !args[c.index].Known {
		return false
	}
	a := args[c.index].Value
	switch c.op {
	case opNE:
		return a != c.value
	case opLT:
		return a < c.value
	case opLE:
		return a <= c.value
	case opEQ:
		return a == c.value
	case opGE:
		return a >= c.value
	case opGT:
		return a > c.value
	default: // opMaskedEQ
		return a&c.value == c.value2
	}
}

type rule struct {
	verdict    Verdict
	conditions []condition // all must hold
}

// Filter is a compiled profile; it is immutable, so containers may share one.
type Filter struct {
	fallback Verdict
	rules    map[string][]rule
}

// CompileError is a profile runc refuses to load: it fails the creation of the container's
// task (StartContainer), not CreateContainer, which only parsed it.
type CompileError struct{ Err error }

func (e *CompileError) Error() string { return e.Err.Error() }

func (e *CompileError) Unwrap() error { return e.Err }

// Compile checks a profile as runc does and compiles it. A nil profile, or one with neither a
// default action nor rules, gives a nil Filter: no filter is installed. Errors are
// *CompileError.
func Compile(p *specs.LinuxSeccomp) (*Filter, error) {
	if p == nil || (p.DefaultAction == "" && len(p.Syscalls) == 0) {
		return nil, nil
	}
	f, err := compile(p)
	if err != nil {
		return nil, &CompileError{Err: err}
	}
	return f, nil
}

func compile(p *specs.LinuxSeccomp) (*Filter, error) {
	for _, fl := range p.Flags {
		if !flags[fl] {
			return nil, fmt.Errorf("seccomp flag %s is not known to runc", fl)
		}
	}
	for _, a := range p.Architectures {
		if !archs[a] {
			return nil, fmt.Errorf("string %s is not a valid arch for seccomp", a)
		}
	}
	if p.DefaultAction == specs.ActNotify {
		return nil, errors.New("SCMP_ACT_NOTIFY cannot be used as default action")
	}
	fallback, err := verdict(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	f := &Filter{fallback: fallback, rules: map[string][]rule{}}
	for _, call := range p.Syscalls {
		if call.Action == specs.ActNotify {
			return nil, errors.New("SCMP_ACT_NOTIFY is not simulated: cri-fake has no seccomp agent to notify")
		}
		v, err := verdict(call.Action, call.ErrnoRet)
		if err != nil {
			return nil, err
		}
		conds, err := conditions(call.Args)
		if err != nil {
			return nil, err
		}
		for _, name := range call.Names {
			if name == "" {
				return nil, errors.New("empty string is not a valid syscall")
			}
			if v == fallback {
				continue // runc drops a rule that only repeats the default
			}
			for _, a := range call.Args {
				if a.Index >= maxArgs {
					return nil, fmt.Errorf("error creating seccomp syscall condition for syscall %s: syscalls only have up to %d arguments (%d given)", name, maxArgs, a.Index)
				}
			}
			for _, c := range conds {
				f.rules[name] = append(f.rules[name], rule{verdict: v, conditions: c})
			}
		}
	}
	return f, nil
}

// verdict converts an action and its return code as runc's getAction does.
func verdict(a specs.LinuxSeccompAction, errnoRet *uint) (Verdict, error) {
	act, ok := actions[a]
	if !ok {
		return Verdict{}, fmt.Errorf("string %s is not a valid action for seccomp", a)
	}
	v := Verdict{Action: act}
	switch act {
	case Errno, Trace:
		// runc: EPERM unless errnoRet says otherwise; libseccomp keeps 16 bits of it.
		v.data = uint16(syscall.EPERM)
		if errnoRet != nil {
			v.data = uint16(*errnoRet)
		}
		v.Errno = syscall.Errno(min(v.data, maxErrno))
		if act == Trace {
			v.Errno = syscall.ENOSYS // no tracer is ever attached
		}
	}
	return v, nil
}

// conditions compiles a rule's arguments into the condition sets it stands for: one set (all
// ANDed) or, when an argument index repeats, one set per condition (runc's fallback). An index
// past the sixth argument is left for the caller to refuse.
func conditions(args []specs.LinuxSeccompArg) ([][]condition, error) {
	all := make([]condition, 0, len(args))
	var seen [maxArgs + 1]bool
	repeated := false
	for _, a := range args {
		o, ok := operators[a.Op]
		if !ok {
			return nil, fmt.Errorf("string %s is not a valid operator for seccomp", a.Op)
		}
		idx := uint8(min(a.Index, maxArgs))
		repeated = repeated || seen[idx]
		seen[idx] = true
		all = append(all, condition{index: idx, op: o, value: a.Value, value2: a.ValueTwo})
	}
	if !repeated {
		return [][]condition{all}, nil
	}
	out := make([][]condition, len(all))
	for i, c := range all {
		out[i] = []condition{c}
	}
	return out, nil
}

// Decide is the filter's verdict on the system call name with args (in the order the system
// call takes them).
func (f *Filter) Decide(name string, args ...Arg) Verdict {
	best, matched := Verdict{}, false
	for _, r := range f.rules[name] {
		if !allHold(r.conditions, args) {
			continue
		}
		if !matched || r.verdict.Action > best.Action {
			best, matched = r.verdict, true
		}
	}
	if !matched {
		return f.fallback
	}
	return best
}

func allHold(conds []condition, args []Arg) bool {
	for _, c := range conds {
		if !c.holds(args) {
			return false
		}
	}
	return true
}
