package kernel

// appletRow is one applet of the table.
type Applet struct {
	Name string
	Run  AppletFunc
	// inline applets run inside the shell without a new process, as busybox
	// ash runs its builtins (so `pgrep echo` never sees them).
	Inline bool
	// busybox applets are linked into /bin of the busybox base image and
	// listed by the busybox applet, in the table's order.
	Busybox bool
}

// appletSet is the table indexed by name. A container keeps the one it was
// started with, so the applets reach it through their process, not through
// a package variable (which would make an initialisation cycle sh -> table -> sh).
type AppletSet struct {
	rows   []Applet
	byName map[string]*Applet
}

func NewAppletSet(rows []Applet) *AppletSet {
	s := &AppletSet{rows: rows, byName: make(map[string]*Applet, len(rows))}
	for i := range rows {
		s.byName[rows[i].Name] = &rows[i]
	}
	return s
}

// lookup is the applet called name.
func (s *AppletSet) Lookup(name string) (AppletFunc, bool) {
	if r := s.byName[name]; r != nil {
		return r.Run, true
	}
	return nil, false
}

// inline is the applet called name when the shell runs it without a process.
func (s *AppletSet) Inline(name string) (AppletFunc, bool) {
	if r := s.byName[name]; r != nil && r.Inline {
		return r.Run, true
	}
	return nil, false
}

// names lists every applet name, in the table's order.
func (s *AppletSet) Names() []string {
	out := make([]string, len(s.rows))
	for i, r := range s.rows {
		out[i] = r.Name
	}
	return out
}

// busybox lists the applets of the busybox image's /bin, in the table's order.
func (s *AppletSet) Busybox() []string {
	var out []string
	for _, r := range s.rows {
		if r.Busybox {
			out = append(out, r.Name)
		}
	}
	return out
}
