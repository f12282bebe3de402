package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/harness/faults/rules"
)

// Fault rules are the fakes' shared rule language (harness/faults/rules) with CNI verbs for
// methods and CNI error numbers for codes, from the "faults" key of cni-fake's entry in the
// conflist and from the JSON file its "faultsFile" key names. They apply after skel's checks and
// the configuration's, before the verb does anything: a rule that fails ADD leaves no lease.
//
// Every invocation is a new process, so the rules' counts (what "after", "times" and
// "probability" depend on) and the random source live in <dataDir>/<network>/faults.json,
// read and written under that file's flock: concurrent invocations count each call once.

// faultVerbs are the verbs a rule may name. VERSION is not among them: its stdin carries only
// a cniVersion (libcni sends no network configuration), so no rule could ever reach it.
var faultVerbs = []string{"ADD", "DEL", "CHECK", "STATUS", "GC"}

// faultEnv are the environment variables a rule's match may name; "CNI_ARGS.KEY" names one
// CNI_ARGS pair, and any other key is a dotted path into the network configuration (stdin).
//
// A rule matches only what the invocation log shows (issue 24: a rule's matched count must not
// reveal what the trace does not): the command is the event's method, the others are the variables
// tracedEnv puts in its attributes, and stdin is its request, as received. CNI_PATH, which the log
// leaves out, is not among them.
var faultEnv = append([]string{"CNI_COMMAND"}, slices.Sorted(maps.Keys(tracedEnv))...)

// tracedEnv are the CNI variables the invocation log records, with their attribute names (Log).
var tracedEnv = map[string]string{"CNI_CONTAINERID": "containerID", "CNI_NETNS": "netns", "CNI_IFNAME": "ifName", "CNI_ARGS": "args"}

const (
	faultStateFile = "faults.json"
	// maxFaultsFile bounds what faultsFile may hold: the rules are read on every invocation.
	maxFaultsFile = 1 << 20
)

// faultState is the content of faults.json.
type faultState struct {
	Seed uint64 `json:"seed"`
	// Rand is the random source's state (rand.PCG's binary form), so probabilities continue one
	// sequence across invocations: with a seed, the same sequence every time the file is new.
	Rand []byte `json:"rand,omitempty"`
	// Rules holds each rule's counts, keyed by its ID and a hash of its definition, so that an
	// edited rule starts counting afresh.
	Rules map[string]faultCounts `json:"rules"`
}

type faultCounts struct {
	Matched int `json:"matched"`
	Hits    int `json:"hits"`
}

// faultKey is a rule's key in the state file: its ID and a hash of its definition.
func faultKey(r rules.Rule) string {
	def, _ := json.Marshal(r)
	h := fnv.New64a()
	h.Write(def)
	return fmt.Sprintf("%s/%016x", r.ID, h.Sum64())
}

// newFaultSet is a set that takes cni-fake's rules: CNI verbs and CNI error numbers.
// src, when not nil, is the random source.
func newFaultSet(src rand.Source) *rules.Set {
	opts := []rules.Option{rules.WithMethods(faultVerbs...), rules.WithCodes(rules.CNICodes)}
	if src != nil {
		opts = append(opts, rules.WithSource(src))
	}
	return rules.NewSet(0, opts...)
}

// validateFaultRule checks a rule as cni-fake applies it; where names it in errors.
func validateFaultRule(set *rules.Set, r rules.Rule, where string) error {
	if strings.EqualFold(r.Method, "VERSION") {
		return configError("%s: VERSION carries no network configuration, so no fault rule can reach it; the verbs are %s", where, strings.Join(faultVerbs, ", "))
	}
	if err := set.Validate(r); err != nil {
		return configError("%s: %v", where, err)
	}
	for k := range r.Match {
		if strings.HasPrefix(k, "CNI_") && !slices.Contains(faultEnv, k) && !strings.HasPrefix(k, "CNI_ARGS.") {
			return configError("%s: match key %q is not a CNI variable (%s, or CNI_ARGS.KEY for one CNI_ARGS pair)", where, k, strings.Join(faultEnv, ", "))
		}
	}
	return nil
}

// faultRules reads the configuration's rules (the "faults" list first, then faultsFile's) and
// its seed. Errors are invalid-configuration errors naming the rule.
func faultRules(conf *NetConf, set *rules.Set) (rs []rules.Rule, seed uint64, seeded bool, err error) {
	type source struct {
		where string
		rules []rules.Rule
	}
	var sources []source
	if len(conf.Faults) > 0 {
		var list []rules.Rule
		if err := json.Unmarshal(conf.Faults, &list); err != nil {
			return nil, 0, false, configError("faults: want a list of fault rules: %v", err)
		}
		sources = append(sources, source{"faults", list})
	}
	if conf.FaultsFile != "" {
		if !filepath.IsAbs(conf.FaultsFile) {
			return nil, 0, false, configError("faultsFile: %q is not an absolute path (the plugin runs in the runtime's working directory)", conf.FaultsFile)
		}
		f, err := os.Open(conf.FaultsFile)
		if err != nil {
			return nil, 0, false, configError("faultsFile: %v", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxFaultsFile+1))
		f.Close()
		if err != nil {
			return nil, 0, false, configError("faultsFile: %v", err)
		}
		if len(b) > maxFaultsFile {
			return nil, 0, false, configError("faultsFile %s: larger than %d bytes", conf.FaultsFile, maxFaultsFile)
		}
		file, err := rules.ParseJSON(b, "faultsFile "+conf.FaultsFile)
		if err != nil {
			return nil, 0, false, configError("%v (cni-fake reads JSON only: a YAML parser would slow every exec down)", err)
		}
		sources = append(sources, source{"faultsFile " + conf.FaultsFile + ": rules", file.Rules})
		seed, seeded = file.Seed, file.Seed != 0
	}
	for _, src := range sources {
		for i, r := range src.rules {
			if err := validateFaultRule(set, r, fmt.Sprintf("%s[%d]", src.where, i)); err != nil {
				return nil, 0, false, err
			}
			rs = append(rs, r)
		}
	}
	return rs, seed, seeded, nil
}

// injectFault applies the first rule that matches this call: it waits for the rule's delay, then
// answers with its error, if it has one. The rule's ID goes into the invocation log.
func (p *Call) injectFault(verb string, args *skel.CmdArgs, conf *NetConf) error {
	if len(conf.Faults) == 0 && conf.FaultsFile == "" {
		return nil
	}
	src := rand.NewPCG(0, 0)
	set := newFaultSet(src)
	rs, seed, seeded, err := faultRules(conf, set)
	if err != nil || len(rs) == 0 {
		return err
	}
	ids, err := set.Add(rs...)
	if err != nil {
		return configError("faults: %v", err)
	}
	keys := make([]string, len(rs))
	for i, r := range rs {
		r.ID = ids[i]
		keys[i] = faultKey(r)
	}

	var fault rules.Fault
	var hit bool
	err = updateFaultState(filepath.Join(conf.DataDir, conf.Name, faultStateFile), func(st *faultState) {
		switch {
		case seeded && st.Seed != seed:
			st.Rand = nil // a new seed starts a new sequence
		case !seeded && st.Rand == nil:
			seed = uint64(time.Now().UnixNano())
		case !seeded:
			seed = st.Seed
		}
		src.Seed(seed, seed^0x9e3779b97f4a7c15) // as rules.NewSet seeds its source
		if st.Rand != nil && src.UnmarshalBinary(st.Rand) != nil {
			src.Seed(seed, seed^0x9e3779b97f4a7c15)
		}
		for i, id := range ids {
			c := st.Rules[keys[i]]
			set.SetCounts(id, c.Matched, c.Hits)
		}
		fault, hit = set.Check(verb, p.faultFields(args))
		st.Seed = seed
		st.Rand, _ = src.MarshalBinary()
		st.Rules = map[string]faultCounts{} // rules no longer configured are forgotten
		for i, r := range set.Rules() {
			st.Rules[keys[i]] = faultCounts{Matched: r.Matched, Hits: r.Hits}
		}
	})
	if err != nil {
		return types.NewError(types.ErrIOFailure, "fault rules: "+err.Error(), "")
	}
	if !hit {
		return nil
	}
	p.attr("fault", fault.Rule)
	if err := fault.Wait(p.ctx); err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("fault rule %s: delay cut short: %v", fault.Rule, err), "")
	}
	if fault.Code == "" {
		return nil
	}
	code, _ := strconv.ParseUint(fault.Code, 10, 32) // the set accepts CNI numbers only
	return types.NewError(uint(code), fault.Message, "")
}

// faultFields looks a match key up in this call: a CNI variable, one CNI_ARGS pair
// ("CNI_ARGS.K8S_POD_NAME"), or a dotted path into the network configuration as the plugin
// received it ("name", "args.cni.foo", "runtimeConfig.portMappings.0.hostPort"). A string reads
// as itself, anything else as compact JSON.
func (p *Call) faultFields(args *skel.CmdArgs) rules.Fields {
	var doc any
	decoded := false
	return func(key string) (string, bool) {
		if slices.Contains(faultEnv, key) {
			return p.env.get(key), true
		}
		if k, ok := strings.CutPrefix(key, "CNI_ARGS."); ok {
			for _, kv := range strings.Split(p.env.get("CNI_ARGS"), ";") {
				if name, v, ok := strings.Cut(kv, "="); ok && name == k {
					return v, true
				}
			}
			return "", false
		}
		if !decoded {
			dec := json.NewDecoder(strings.NewReader(string(args.StdinData)))
			dec.UseNumber() // 8080 reads "8080", not "8080.0" or 8.08e+03
			_ = dec.Decode(&doc)
			decoded = true
		}
		v := doc
		for _, part := range strings.Split(key, ".") {
			switch n := v.(type) {
			case map[string]any:
				var ok bool
				if v, ok = n[part]; !ok {
					return "", false
				}
			case []any:
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(n) {
					return "", false
				}
				v = n[i]
			default:
				return "", false
			}
		}
		if s, ok := v.(string); ok {
			return s, true
		}
		b, err := json.Marshal(v)
		return string(b), err == nil
	}
}

// updateFaultState runs f on the state in path under the file's flock and writes it back.
func updateFaultState(path string, f func(*faultState)) error {
	const flags = os.O_RDWR | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	file, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		file, err = os.OpenFile(path, flags, 0o600)
	}
	if err != nil {
		return err
	}
	defer file.Close() // releases the lock too
	for {
		err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			return fmt.Errorf("lock %s: %v", path, err)
		}
	}
	st, err := readFaultState(file, path)
	if err != nil {
		return err
	}
	f(st)
	out, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := file.Truncate(0); err != nil {
		return err
	}
	_, err = file.WriteAt(out, 0)
	return err
}

func readFaultState(r io.Reader, path string) (*faultState, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	st := &faultState{}
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("%s is not a fault state file (delete it to start counting afresh): %v", path, err)
		}
	}
	return st, nil
}
