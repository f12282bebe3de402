package scenario

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A field path addresses a value in an answer rendered as JSON: dotted field names (proto or
// lowerCamel), a list element by index ("containers[0]") or by a field's value
// ("conditions[type=NetworkReady]"), and map entries by key ("labels.app").
type segment struct {
	name string
	sel  string // "", "0", "type=NetworkReady"
}

func splitPath(path string) ([]segment, error) {
	if path == "" {
		return nil, fmt.Errorf("empty field path")
	}
	var out []segment
	for _, part := range splitOutsideBrackets(path) {
		s := segment{name: part}
		if i := strings.IndexByte(part, '['); i >= 0 {
			if !strings.HasSuffix(part, "]") || i == 0 {
				return nil, fmt.Errorf("field path %q: bad selector in %q (want name[0] or name[field=value])", path, part)
			}
			s.name, s.sel = part[:i], part[i+1:len(part)-1]
			if s.sel == "" {
				return nil, fmt.Errorf("field path %q: empty selector in %q", path, part)
			}
		}
		if s.name == "" {
			return nil, fmt.Errorf("field path %q: empty field name", path)
		}
		out = append(out, s)
	}
	return out, nil
}

func splitOutsideBrackets(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// lookup finds the value at path in decoded JSON; ok is false when it is absent.
func lookup(doc any, path string) (any, bool, error) {
	segs, err := splitPath(path)
	if err != nil {
		return nil, false, err
	}
	cur := doc
	for _, s := range segs {
		m, isMap := cur.(map[string]any)
		if !isMap {
			return nil, false, nil
		}
		v, ok := m[s.name]
		if !ok {
			v, ok = m[camel(s.name)]
		}
		if !ok {
			return nil, false, nil
		}
		cur = v
		if s.sel == "" {
			continue
		}
		list, isList := cur.([]any)
		if !isList {
			return nil, false, nil
		}
		if n, err := strconv.Atoi(s.sel); err == nil {
			if n < 0 {
				n += len(list)
			}
			if n < 0 || n >= len(list) {
				return nil, false, nil
			}
			cur = list[n]
			continue
		}
		k, want, found := strings.Cut(s.sel, "=")
		if !found {
			return nil, false, fmt.Errorf("field path %q: selector [%s]: want an index or field=value", path, s.sel)
		}
		var hit any
		for _, e := range list {
			if em, ok := e.(map[string]any); ok {
				v, ok := em[k]
				if !ok {
					v, ok = em[camel(k)]
				}
				if ok && scalarString(v) == want {
					hit = e
					break
				}
			}
		}
		if hit == nil {
			return nil, false, nil
		}
		cur = hit
	}
	return cur, true, nil
}

// camel turns a proto field name into its JSON name: pod_sandbox_id → podSandboxId.
func camel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

// scalarString renders a JSON value for comparison: strings as they are, numbers without a
// trailing .0, everything else as compact JSON. protojson writes 64-bit integers as strings, so a
// scenario's `exitCode: 0` and `createdAt: "5"` compare the same way either side.
func scalarString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// check applies one expectation to an answer rendered with every field (call.FullJSON), so a
// zero value is present and compares as itself; the returned text says what was found.
func (fe FieldExpect) check(doc any, value any) (ok bool, got string, err error) {
	v, present, err := lookup(doc, fe.Path)
	if err != nil {
		return false, "", err
	}
	present = present && v != nil
	got = "<absent>"
	if present {
		got = scalarString(v)
	}
	switch fe.Op {
	case "exists":
		return present == value.(bool), got, nil
	case "notEmpty":
		return (present && !isEmpty(v)) == value.(bool), got, nil
	case "equals":
		return present && scalarString(v) == value.(string), got, nil
	case "contains":
		want := value.(string)
		if list, ok := v.([]any); ok {
			// An element equal to the text, or an object whose JSON contains it
			// ({contains: CONTROLLER_SERVICE} on a capability list).
			for _, e := range list {
				es := scalarString(e)
				_, scalar := e.(string)
				if es == want || (!scalar && strings.Contains(es, want)) {
					return true, got, nil
				}
			}
			return false, got, nil
		}
		return present && strings.Contains(scalarString(v), want), got, nil
	case "matches":
		re, err := regexp.Compile(value.(string))
		if err != nil {
			return false, got, err
		}
		return present && re.MatchString(scalarString(v)), got, nil
	case "len":
		n := 0
		switch x := v.(type) {
		case []any:
			n = len(x)
		case map[string]any:
			n = len(x)
		case string:
			n = len(x)
		}
		return n == value.(int), fmt.Sprintf("len %d", n), nil
	case "oneOf":
		for _, want := range value.([]string) {
			if present && scalarString(v) == want {
				return true, got, nil
			}
		}
		return false, got, nil
	}
	return false, got, fmt.Errorf("unknown operator %q", fe.Op)
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}
