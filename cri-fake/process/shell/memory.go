package shell

import (
	"strings"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// What a shell holds is charged to its container's memory (kernel/memory.go), so a container
// past its limit is OOM-killed instead of growing cri-fake, as busybox ash would be: its
// variables (name and value), exported names, functions (their parsed tree), positional
// parameters and trap actions for as long as it holds them; a script read whole for as long as
// it runs; the tree of the line being run; and, while a command runs, its expanded words and
// environment, here-documents, command substitution output and the builders behind them.
//
// A subshell (a background job, a pipeline element, ( ), $( )) copies its parent's variables:
// each copy's entries are charged again (they are new memory), but a value of a page or more is
// charged once however many shells hold it (kernel.Proc.HoldString), as a forked process's pages
// are charged once until written.

const (
	// entryOverhead is what a variable, exported name or function takes in its map besides its
	// name and value.
	entryOverhead = 64
	// fieldOverhead is what each field of a command's words, and each positional parameter,
	// takes besides its bytes (a string header).
	fieldOverhead = 16
	// tokenCost is the most a parsed token's share of the tree takes: BenchmarkParseRetained
	// measures 110 bytes per token for a script of `:` lines, the costliest shape, and 67 to
	// 101 for the others; a script's tree is charged at this rate as it is parsed.
	tokenCost = 128
)

// setVar sets a variable, charging its name (when new) and value and giving back the value it
// replaces. It fails, leaving the variable as it was, when the container is out of memory (the OOM
// killer then ends it).
func (s *shell) setVar(name, v string) bool {
	old, had := s.vars[name]
	if err := s.p.HoldString(v); err != nil {
		return false
	}
	if had {
		s.p.DropString(old)
	} else if err := s.p.Charge(int64(len(name)) + entryOverhead); err != nil {
		s.p.DropString(v)
		return false
	}
	s.vars[name] = v
	return true
}

// unsetVar removes a variable and gives back what it held.
func (s *shell) unsetVar(name string) {
	if old, had := s.vars[name]; had {
		s.p.DropString(old)
		s.p.Uncharge(int64(len(name)) + entryOverhead)
		delete(s.vars, name)
	}
}

// export marks name exported (or not), charging the mark.
func (s *shell) export(name string, on bool) {
	_, had := s.exported[name]
	switch {
	case on && !had:
		if s.p.Charge(int64(len(name))+entryOverhead) != nil {
			return
		}
		s.exported[name] = true
	case !on && had:
		s.p.Uncharge(int64(len(name)) + entryOverhead)
		delete(s.exported, name)
	}
}

// setFunc defines a function: its tree is charged once however many subshells hold it.
func (s *shell) setFunc(f *funcDef) {
	if err := s.p.ChargeShared(f, f.cost); err != nil {
		return
	}
	if _, had := s.funcs[f.name]; had {
		s.unsetFunc(f.name)
	}
	s.p.Charge(int64(len(f.name)) + entryOverhead)
	s.funcs[f.name] = f
}

func (s *shell) unsetFunc(name string) {
	if f, had := s.funcs[name]; had {
		s.p.UnchargeShared(f)
		s.p.Uncharge(int64(len(name)) + entryOverhead)
		delete(s.funcs, name)
	}
}

// setParams replaces the positional parameters ($1 ...), charging them.
func (s *shell) setParams(params []string) {
	s.dropParams()
	for i, p := range params {
		if s.p.HoldString(p) != nil || s.p.Charge(fieldOverhead) != nil {
			params = params[:i] // out of memory: the container is being killed
			break
		}
	}
	s.params, s.heldParams = params, true
}

// dropParams gives back what the positional parameters held, when the shell charged them
// (setParams; a function's arguments are its command's words, charged with the command).
func (s *shell) dropParams() {
	if s.heldParams {
		for _, p := range s.params {
			s.p.DropString(p)
			s.p.Uncharge(fieldOverhead)
		}
	}
	s.heldParams = false
}

// shift drops the first n positional parameters.
func (s *shell) shift(n int) {
	if s.heldParams {
		for _, p := range s.params[:n] {
			s.p.DropString(p)
			s.p.Uncharge(fieldOverhead)
		}
	}
	s.params = s.params[n:]
}

// chargeCopy charges a subshell for what it copied from its parent (subshell).
func (s *shell) chargeCopy() {
	for k, v := range s.vars {
		s.p.HoldString(v)
		s.p.Charge(int64(len(k)) + entryOverhead)
	}
	for k := range s.exported {
		s.p.Charge(int64(len(k)) + entryOverhead)
	}
	for k, f := range s.funcs {
		s.p.ChargeShared(f, f.cost)
		s.p.Charge(int64(len(k)) + entryOverhead)
	}
	for _, p := range s.params {
		s.p.HoldString(p)
		s.p.Charge(fieldOverhead)
	}
	s.heldParams = true
}

// release gives back everything the shell holds, when it (or the subshell) ends.
func (s *shell) release() {
	for k := range s.vars {
		s.unsetVar(k)
	}
	for k := range s.exported {
		s.export(k, false)
	}
	for k := range s.funcs {
		s.unsetFunc(k)
	}
	s.dropParams()
	s.params = nil
}

// releaseAll is release for the shell itself, which also gives back the trap actions.
func (s *shell) releaseAll() {
	s.release()
	s.sig.mu.Lock()
	for k := range s.sig.traps {
		s.setTrap(k, "", true)
	}
	s.sig.mu.Unlock()
}

// setTrap sets a signal's trap action (shared by the shell and its subshells), charging it; ""
// ignores the signal, and remove drops the trap. Caller holds s.sig.mu.
func (s *shell) setTrap(key, action string, remove bool) {
	if old, had := s.sig.traps[key]; had {
		s.p.DropString(old)
		s.p.Uncharge(int64(len(key)) + entryOverhead)
		delete(s.sig.traps, key)
	}
	if remove || s.p.HoldString(action) != nil {
		return
	}
	if s.p.Charge(int64(len(key))+entryOverhead) != nil {
		s.p.DropString(action)
		return
	}
	s.sig.traps[key] = action
}

// holdFields charges a command's expanded words (or a for loop's list) to h.
func holdFields(h *kernel.Held, fields []string) error {
	n := int64(0)
	for _, f := range fields {
		n += int64(len(f)) + fieldOverhead
	}
	return h.Grow(n)
}

// holdEnv charges an environment built for a command to h.
func holdEnv(h *kernel.Held, env []string) error {
	return holdFields(h, env)
}

// joinHeld is strings.Join charged to h (eval's source).
func joinHeld(h *kernel.Held, args []string) (string, error) {
	src := strings.Join(args, " ")
	return src, h.Grow(int64(len(src)))
}
