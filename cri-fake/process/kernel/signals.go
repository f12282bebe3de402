package kernel

import (
	"strconv"
	"strings"
	"syscall"
)

func SignalName(sig syscall.Signal) string {
	for name, n := range SignalNumbers {
		if n == sig {
			return name
		}
	}
	return strconv.Itoa(int(sig))
}

var SignalNumbers = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "PIPE": syscall.SIGPIPE, "ALRM": syscall.SIGALRM,
	"TERM": syscall.SIGTERM, "CHLD": syscall.SIGCHLD, "CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP,
	"TSTP": syscall.SIGTSTP, "WINCH": syscall.SIGWINCH, "ABRT": syscall.SIGABRT, "SEGV": syscall.SIGSEGV,
}

// parseSignal accepts TERM, SIGTERM, term and 15.
func ParseSignal(s string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		return syscall.Signal(n), n >= 0 && n < 65
	}
	s = strings.TrimPrefix(strings.ToUpper(s), "SIG")
	sig, ok := SignalNumbers[s]
	return sig, ok
}
