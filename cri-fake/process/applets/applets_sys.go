package applets

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// parseSleep accepts busybox sleep arguments: 1, 0.5, 2s, 3m, 1h, 1d, infinity.
func parseSleep(a string) (time.Duration, bool) {
	if a == "inf" || a == "infinity" {
		return time.Duration(math.MaxInt64), true
	}
	unit := time.Second
	switch {
	case strings.HasSuffix(a, "s"):
		a = strings.TrimSuffix(a, "s")
	case strings.HasSuffix(a, "m"):
		a, unit = strings.TrimSuffix(a, "m"), time.Minute
	case strings.HasSuffix(a, "h"):
		a, unit = strings.TrimSuffix(a, "h"), time.Hour
	case strings.HasSuffix(a, "d"):
		a, unit = strings.TrimSuffix(a, "d"), 24*time.Hour
	}
	// Digits with an optional fraction only: busybox refuses "nan", "-1", "1e3" and "0x10".
	whole, frac, _ := strings.Cut(a, ".")
	if whole+frac == "" || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(a, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	if f*float64(unit) > float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(f * float64(unit)), true
}

// SleepDuration is how long `sleep ARGS...` (args[0] is the program) waits, as appletSleep
// reads its operands; false when it would fail with its usage or an invalid number.
func SleepDuration(args []string) (time.Duration, bool) {
	if len(args) < 2 {
		return 0, false
	}
	var total time.Duration
	for _, a := range args[1:] {
		d, ok := parseSleep(a)
		if !ok {
			return 0, false
		}
		if total+d < total {
			total = time.Duration(math.MaxInt64)
		} else {
			total += d
		}
	}
	return total, true
}

// appletSleep sleeps until the time is up or the process is signalled
// (the signal's action decides the exit status).
func appletSleep(p *kernel.Proc) int {
	if len(p.Args) < 2 {
		p.Errorf("usage: sleep N")
		return 1
	}
	for _, a := range p.Args[1:] {
		if _, ok := parseSleep(a); !ok {
			p.Errorf("invalid number '%s'", a)
			return 1
		}
	}
	total, _ := SleepDuration(p.Args)
	// A dormant sleep woken up late (kernel.Spec.StartedAt) waits only for the rest.
	return wait(p, max(total-p.Elapsed(), 0))
}

// wait blocks for d or until the process ends.
func wait(p *kernel.Proc, d time.Duration) int {
	p.Idle()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-p.Ctx().Done():
		code, _ := kernel.ExitCause(p.Ctx())
		return code
	}
}

func appletHostname(p *kernel.Proc) int {
	opts, args, _ := libbb.Flags(p.Args[1:], "F")
	h := p.Hostname()
	if len(args) > 0 {
		if err := p.SetHostname(args[0]); err != nil {
			p.Errorf("sethostname: %s", vfs.Strerror(err))
			return 1
		}
		return 0
	}
	if opts['s'] != "" {
		h, _, _ = strings.Cut(h, ".")
	}
	if opts['i'] != "" {
		data, _ := p.FS().ReadFile("/etc/hosts")
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && f[1] == h {
				fmt.Fprintln(p.Stdout, f[0])
				return 0
			}
		}
		p.Errorf("%s: Unknown host", h)
		return 1
	}
	fmt.Fprintln(p.Stdout, h)
	return 0
}

func identityName(p *kernel.Proc) string {
	if p.Identity().Username != "" {
		return p.Identity().Username
	}
	return userName(p, p.Identity().UID)
}

func groups(p *kernel.Proc) []int {
	id := p.Identity()
	out := []int{id.GID}
	seen := map[int]bool{id.GID: true}
	for _, g := range id.AdditionalGIDs {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

// appletID prints uid, gid and groups like busybox id (-u -g -G -n -r).
func appletID(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) > 0 {
		p.Errorf("%s: no such user", args[0])
		return 1
	}
	id := p.Identity()
	names := opts['n'] != ""
	show := func(n int, name string) (string, bool) {
		if !names {
			return strconv.Itoa(n), true
		}
		if name == "" {
			return strconv.Itoa(n), false
		}
		return name, true
	}
	switch {
	case opts['u'] != "":
		s, ok := show(id.UID, identityName(p))
		if !ok {
			p.Errorf("unknown ID %d", id.UID)
			return 1
		}
		fmt.Fprintln(p.Stdout, s)
	case opts['g'] != "":
		s, ok := show(id.GID, groupName(p, id.GID))
		if !ok {
			p.Errorf("unknown ID %d", id.GID)
			return 1
		}
		fmt.Fprintln(p.Stdout, s)
	case opts['G'] != "":
		var parts []string
		st := 0
		for _, g := range groups(p) {
			s, ok := show(g, groupName(p, g))
			if !ok {
				st = 1
			}
			parts = append(parts, s)
		}
		fmt.Fprintln(p.Stdout, strings.Join(parts, " "))
		return st
	default:
		named := func(n int, name string) string {
			if name == "" {
				return strconv.Itoa(n)
			}
			return fmt.Sprintf("%d(%s)", n, name)
		}
		var gs []string
		for _, g := range groups(p) {
			gs = append(gs, named(g, groupName(p, g)))
		}
		fmt.Fprintf(p.Stdout, "uid=%s gid=%s groups=%s\n", named(id.UID, identityName(p)), named(id.GID, groupName(p, id.GID)), strings.Join(gs, ","))
	}
	return 0
}

func appletWhoami(p *kernel.Proc) int {
	n := identityName(p)
	if n == "" {
		p.Errorf("unknown uid %d", p.Identity().UID)
		return 1
	}
	fmt.Fprintln(p.Stdout, n)
	return 0
}

func appletEnv(p *kernel.Proc) int {
	args := p.Args[1:]
	env := append([]string(nil), p.Env...)
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "-i" || a == "-":
			env = nil
		case a == "-u" && len(args) > 1:
			args = args[1:]
			env = kernel.UnsetEnv(env, args[0])
		case strings.Contains(a, "=") && !strings.HasPrefix(a, "="):
			k, _, _ := strings.Cut(a, "=")
			env = append(kernel.UnsetEnv(env, k), a)
		default:
			return p.RunArgs(args, env)
		}
		args = args[1:]
	}
	for _, kv := range env {
		fmt.Fprintln(p.Stdout, kv)
	}
	return 0
}

func appletPrintenv(p *kernel.Proc) int {
	if len(p.Args) == 1 {
		for _, kv := range p.Env {
			fmt.Fprintln(p.Stdout, kv)
		}
		return 0
	}
	st := 0
	for _, k := range p.Args[1:] {
		found := false
		for _, kv := range p.Env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				fmt.Fprintln(p.Stdout, v)
				found = true
				break
			}
		}
		if !found {
			st = 1
		}
	}
	return st
}

func appletPwd(p *kernel.Proc) int {
	fmt.Fprintln(p.Stdout, p.Dir)
	return 0
}

// strftime formats t with the common C conversions.
func strftime(f string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			b.WriteString(t.Format("2006"))
		case 'y':
			b.WriteString(t.Format("06"))
		case 'm':
			b.WriteString(t.Format("01"))
		case 'd':
			b.WriteString(t.Format("02"))
		case 'e':
			b.WriteString(t.Format("_2"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'I':
			b.WriteString(t.Format("03"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'S':
			b.WriteString(t.Format("05"))
		case 'N':
			fmt.Fprintf(&b, "%09d", t.Nanosecond())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

func appletDate(p *kernel.Proc) int {
	args := p.Args[1:]
	t := time.Now()
	utc := false
	format := "%a %b %e %H:%M:%S %Z %Y"
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "-u":
			utc = true
		case a == "-I":
			format = "%Y-%m-%d"
		case strings.HasPrefix(a, "-I"):
			format = "%Y-%m-%dT%H:%M:%S%z"
		case a == "-R":
			format = "%a, %d %b %Y %H:%M:%S %z"
		case strings.HasPrefix(a, "+"):
			format = a[1:]
		case a == "-d" && len(args) > 1:
			args = args[1:]
			if v, ok := strings.CutPrefix(args[0], "@"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				t = time.Unix(n, 0)
			}
		default:
			p.Errorf("invalid date '%s'", a)
			return 1
		}
		args = args[1:]
	}
	if utc || os.Getenv("TZ") == "" {
		t = t.UTC()
	}
	fmt.Fprintln(p.Stdout, strftime(format, t))
	return 0
}

func appletPgrep(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "u")
	if err != nil {
		p.Errorf("%v", err)
		return 2
	}
	if len(args) == 0 {
		p.Errorf("usage: pgrep [-flnovx] PATTERN")
		return 2
	}
	expr := breToGo(args[0])
	if opts['x'] != "" {
		expr = "^(?:" + expr + ")$"
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		p.Errorf("bad regex '%s'", args[0])
		return 2
	}
	var hits []kernel.ProcessInfo
	for _, pi := range p.Processes() {
		if pi.PID == p.Pid() {
			continue // pgrep never reports itself
		}
		subject := pi.Name
		if opts['f'] != "" {
			subject = strings.Join(pi.Args, " ")
		}
		if re.MatchString(subject) != (opts['v'] != "") {
			hits = append(hits, pi)
		}
	}
	if opts['n'] != "" && len(hits) > 1 {
		hits = hits[len(hits)-1:]
	}
	if opts['o'] != "" && len(hits) > 1 {
		hits = hits[:1]
	}
	for _, h := range hits {
		if opts['l'] != "" {
			fmt.Fprintf(p.Stdout, "%d %s\n", h.PID, h.Name)
		} else if opts['a'] != "" {
			fmt.Fprintf(p.Stdout, "%d %s\n", h.PID, strings.Join(h.Args, " "))
		} else {
			fmt.Fprintln(p.Stdout, h.PID)
		}
	}
	if len(hits) == 0 {
		return 1
	}
	return 0
}

func appletPidof(p *kernel.Proc) int {
	opts, args, _ := libbb.Flags(p.Args[1:], "o")
	var pids []string
	for _, pi := range p.Processes() {
		if pi.PID == p.Pid() {
			continue
		}
		for _, name := range args {
			if pi.Name == name {
				pids = append(pids, strconv.Itoa(pi.PID))
			}
		}
	}
	// pidof lists the newest first.
	sort.Slice(pids, func(i, j int) bool {
		a, _ := strconv.Atoi(pids[i])
		b, _ := strconv.Atoi(pids[j])
		return a > b
	})
	if opts['s'] != "" && len(pids) > 1 {
		pids = pids[:1]
	}
	if len(pids) == 0 {
		return 1
	}
	fmt.Fprintln(p.Stdout, strings.Join(pids, " "))
	return 0
}

func appletKill(p *kernel.Proc) int {
	args := p.Args[1:]
	sig := syscall.SIGTERM
	if len(args) > 0 && (args[0] == "-l" || args[0] == "-L") {
		names := make([]string, 0, len(kernel.SignalNumbers))
		for n := range kernel.SignalNumbers {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return kernel.SignalNumbers[names[i]] < kernel.SignalNumbers[names[j]] })
		for _, n := range names {
			fmt.Fprintf(p.Stdout, "%2d) %s\n", kernel.SignalNumbers[n], n)
		}
		return 0
	}
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && len(args[0]) > 1 {
		spec := args[0][1:]
		args = args[1:]
		if (spec == "s" || spec == "n") && len(args) > 0 {
			spec = args[0]
			args = args[1:]
		}
		s, ok := kernel.ParseSignal(spec)
		if !ok {
			p.Errorf("bad signal name '%s'", spec)
			return 1
		}
		sig = s
	}
	if len(args) == 0 {
		p.Errorf("usage: kill [-SIG] PID...")
		return 1
	}
	st := 0
	for _, a := range args {
		pid, err := strconv.Atoi(a)
		if err != nil {
			p.Errorf("can't kill pid %s: No such process", a)
			st = 1
			continue
		}
		denied, err := p.Kill(pid, sig)
		if err != nil {
			p.Errorf("can't kill pid %d: No such process", pid)
			st = 1
			continue
		}
		for ; denied > 0; denied-- {
			p.Errorf("can't kill pid %d: Operation not permitted", pid)
			st = 1
		}
	}
	return st
}

func appletSysctl(p *kernel.Proc) int {
	opts, args, _ := libbb.Flags(p.Args[1:], "")
	if opts['a'] != "" || opts['A'] != "" {
		sysctls := p.FS().Sysctls()
		keys := make([]string, 0, len(sysctls))
		for k := range sysctls {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(p.Stdout, "%s = %s\n", strings.ReplaceAll(k, "/", "."), sysctls[k])
		}
		return 0
	}
	st := 0
	for _, a := range args {
		k, v, set := strings.Cut(a, "=")
		key := strings.ReplaceAll(k, ".", "/")
		if set {
			// /proc/sys is read-only in a container (runc mounts it ro).
			p.Errorf("error setting key '%s': Read-only file system", k)
			st = 1
			continue
		}
		_ = v
		data, err := p.FS().ReadFile("/proc/sys/" + key)
		if err != nil {
			p.Errorf("error: '%s' is an unknown key", k)
			st = 1
			continue
		}
		val := strings.TrimSuffix(string(data), "\n")
		if opts['n'] != "" {
			fmt.Fprintln(p.Stdout, val)
		} else {
			// busybox prints the name with dots, however it was given (sysctl.c outname).
			fmt.Fprintf(p.Stdout, "%s = %s\n", strings.ReplaceAll(k, "/", "."), val)
		}
	}
	return st
}

func appletNproc(p *kernel.Proc) int {
	fmt.Fprintln(p.Stdout, p.CPUs())
	return 0
}

func psTable(p *kernel.Proc) string {
	var b strings.Builder
	b.WriteString("PID   USER     TIME  COMMAND\n")
	for _, pi := range p.Processes() {
		u := userName(p, pi.UID)
		if u == "" {
			u = strconv.Itoa(pi.UID)
		}
		fmt.Fprintf(&b, "%5d %-8s  0:00 %s\n", pi.PID, u, strings.Join(pi.Args, " "))
	}
	return b.String()
}

func appletPs(p *kernel.Proc) int {
	fmt.Fprint(p.Stdout, psTable(p))
	return 0
}

// appletTop prints a process table every few seconds until it is stopped
// (critest's default container command is `sh -c top`).
func appletTop(p *kernel.Proc) int {
	opts, _, _ := libbb.Flags(p.Args[1:], "dn")
	delay := 5 * time.Second
	if d, ok := opts['d']; ok {
		if v, ok := parseSleep(d); ok && v > 0 {
			delay = v
		}
	}
	iterations := -1
	if n, ok := opts['n']; ok {
		iterations, _ = strconv.Atoi(n)
	}
	for i := 0; iterations < 0 || i < iterations; i++ {
		procs := p.Processes()
		fmt.Fprintf(p.Stdout, "Mem: 2015232K used, 2015232K free\nLoad average: 0.08 0.03 0.01 1/%d 42\n%s", len(procs), psTable(p))
		if iterations >= 0 && i == iterations-1 {
			return 0
		}
		if code := wait(p, delay); p.Ctx().Err() != nil {
			return code
		}
	}
	return 0
}

func appletUname(p *kernel.Proc) int {
	opts, _, _ := libbb.Flags(p.Args[1:], "")
	var uts syscall.Utsname
	release, machine := "6.1.0", "x86_64"
	if syscall.Uname(&uts) == nil {
		release, machine = cstr(uts.Release[:]), cstr(uts.Machine[:])
	}
	fields := map[byte]string{'s': "Linux", 'n': p.Hostname(), 'r': release, 'v': "#1 SMP", 'm': machine, 'o': "GNU/Linux"}
	order := "snrvmo"
	var out []string
	if opts['a'] != "" {
		for i := 0; i < len(order); i++ {
			out = append(out, fields[order[i]])
		}
	} else {
		for i := 0; i < len(order); i++ {
			if opts[order[i]] != "" {
				out = append(out, fields[order[i]])
			}
		}
	}
	if len(out) == 0 {
		out = []string{"Linux"}
	}
	fmt.Fprintln(p.Stdout, strings.Join(out, " "))
	return 0
}

func cstr[T int8 | uint8](b []T) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

func appletWhich(p *kernel.Proc) int {
	st := 0
	for _, name := range p.Args[1:] {
		exe, err := p.LookPath(name, p.Env, p.Dir)
		if err != nil {
			st = 1
			continue
		}
		fmt.Fprintln(p.Stdout, exe.Path)
	}
	return st
}

func appletBusybox(p *kernel.Proc) int {
	if len(p.Args) > 1 {
		p.Args = p.Args[1:]
		if a, ok := p.Applet(p.Args[0]); ok {
			return a(p)
		}
		p.Errorf("applet not found")
		return 127
	}
	fmt.Fprintln(p.Stdout, "BusyBox v1.36.1 (plugsim simulation) multi-call binary.")
	fmt.Fprintln(p.Stdout, "Currently defined functions:")
	fmt.Fprintln(p.Stdout, "\t"+strings.Join(p.BusyboxApplets(), ", "))
	return 0
}

// appletProgram stands for an image's own program that the simulation does
// not know: it runs until a signal ends it (default actions) or the image
// behaviour makes it exit.
func appletProgram(p *kernel.Proc) int {
	<-p.Ctx().Done()
	code, _ := kernel.ExitCause(p.Ctx())
	return code
}
