// Package shell is the container's sh: a POSIX sh subset as busybox ash
// runs it, from the lexer and parser (shell_parse.go) through expansion
// (shell_expand.go: parameters, command substitution, arithmetic, field
// splitting, globbing) to the interpreter and its builtins, traps and jobs
// (shell.go). Sh is the applet that runs it.
//
// It stops at the kernel: the programs it runs, forks, pipes and signals go
// through kernel.Proc, and which program a command name runs is the
// container's applet table (the inline ones run without a process).
package shell
