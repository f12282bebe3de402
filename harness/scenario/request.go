package scenario

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// checkMessage compares a YAML request with the protobuf message it will become, so a misspelt
// field or a wrong enum value is reported at its line before anything is called (protojson would
// report it later, without a line).
func (p *parser) checkMessage(n *yaml.Node, md protoreflect.MessageDescriptor, where string) {
	if isNull(n) {
		return
	}
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return // well-known types have their own JSON forms
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, where, "want a mapping for %s, got %s", md.FullName(), kindName(n))
		return
	}
	for i := 0; i+1 < len(n.Content) && p.err == nil; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fd := fieldByName(md, k.Value)
		w := join(where, k.Value)
		if fd == nil {
			p.fail(k, w, "%s has no field %q (fields: %s)", md.FullName(), k.Value, fieldNames(md))
			return
		}
		p.checkField(v, fd, w)
	}
}

func (p *parser) checkField(v *yaml.Node, fd protoreflect.FieldDescriptor, where string) {
	if isNull(v) {
		return
	}
	switch {
	case fd.IsMap():
		if v.Kind != yaml.MappingNode {
			p.fail(v, where, "want a mapping, got %s", kindName(v))
			return
		}
		for i := 0; i+1 < len(v.Content) && p.err == nil; i += 2 {
			p.checkValue(v.Content[i+1], fd.MapValue(), where+"."+v.Content[i].Value)
		}
	case fd.IsList():
		if v.Kind != yaml.SequenceNode {
			p.fail(v, where, "want a list, got %s", kindName(v))
			return
		}
		for i, e := range v.Content {
			if p.err != nil {
				return
			}
			p.checkValue(e, fd, fmt.Sprintf("%s[%d]", where, i))
		}
	default:
		p.checkValue(v, fd, where)
	}
}

// checkValue checks one value of a field's kind (a list element or a map value included).
func (p *parser) checkValue(v *yaml.Node, fd protoreflect.FieldDescriptor, where string) {
	if isNull(v) {
		return
	}
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		p.checkMessage(v, fd.Message(), where)
		return
	}
	if v.Kind != yaml.ScalarNode {
		p.fail(v, where, "want a %s value, got %s", fd.Kind(), kindName(v))
		return
	}
	if strings.Contains(v.Value, "${") {
		return // checked when the variable is known
	}
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if fd.Enum().Values().ByName(protoreflect.Name(v.Value)) == nil {
			if _, err := strconv.Atoi(v.Value); err != nil {
				var names []string
				for i := 0; i < fd.Enum().Values().Len(); i++ {
					names = append(names, string(fd.Enum().Values().Get(i).Name()))
				}
				p.fail(v, where, "%q is not a %s (one of %s)", v.Value, fd.Enum().Name(), strings.Join(names, ", "))
			}
		}
	case protoreflect.BoolKind:
		if v.Value != "true" && v.Value != "false" {
			p.fail(v, where, "want true or false, got %q", v.Value)
		}
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		if _, err := strconv.ParseInt(v.Value, 0, 64); err != nil {
			p.fail(v, where, "want an integer, got %q", v.Value)
		}
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		if _, err := strconv.ParseUint(v.Value, 0, 64); err != nil {
			p.fail(v, where, "want a non-negative integer, got %q", v.Value)
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if _, err := strconv.ParseFloat(v.Value, 64); err != nil {
			p.fail(v, where, "want a number, got %q", v.Value)
		}
	}
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// fieldByName finds a field by its proto name (pod_sandbox_id) or JSON name (podSandboxId).
func fieldByName(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByName(protoreflect.Name(name)); fd != nil {
		return fd
	}
	return md.Fields().ByJSONName(name)
}

func fieldNames(md protoreflect.MessageDescriptor) string {
	var out []string
	for i := 0; i < md.Fields().Len(); i++ {
		out = append(out, md.Fields().Get(i).JSONName())
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// checkPath checks that a field path ("status.conditions[type=NetworkReady].status") names fields
// the response message has.
// CheckPath says whether path (a.b[0].c, as a step's capture or expect names a field) names a
// field of messages of type md; the error says which segment does not.
func CheckPath(md protoreflect.MessageDescriptor, path string) error {
	segs, err := splitPath(path)
	if err != nil {
		return err
	}
	var fd protoreflect.FieldDescriptor
	inMap := false
	for i, s := range segs {
		if inMap {
			// A map key: anything goes; the value's type decides what may follow.
			inMap = false
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				if i+1 < len(segs) {
					return fmt.Errorf("%s: map values of %s are scalars, nothing can follow the key", path, fd.JSONName())
				}
				return nil
			}
			md = fd.MapValue().Message()
			continue
		}
		if md == nil {
			return fmt.Errorf("%s: %s is a scalar, it has no field %q", path, fd.JSONName(), s.name)
		}
		if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
			return nil
		}
		fd = fieldByName(md, s.name)
		if fd == nil {
			return fmt.Errorf("%s has no field %q (fields: %s)", md.FullName(), s.name, fieldNames(md))
		}
		if s.sel != "" && !fd.IsList() {
			return fmt.Errorf("%s: %s is not a list, [%s] does not apply", path, s.name, s.sel)
		}
		switch {
		case fd.IsMap():
			inMap = true
			md = nil
		case fd.IsList() && s.sel == "":
			// A whole list: only len/contains/exists make sense; nothing may follow.
			if i+1 < len(segs) {
				return fmt.Errorf("%s: %s is a list; select an element ([0] or [field=value]) before %q", path, s.name, segs[i+1].name)
			}
		case fd.Kind() == protoreflect.MessageKind:
			md = fd.Message()
		default:
			md = nil
		}
	}
	return nil
}

// nodeJSON turns a YAML node into JSON.
func nodeJSON(n *yaml.Node) ([]byte, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(jsonable(v))
}

// jsonable converts what yaml.v3 decodes (map[string]any, and map[any]any for odd keys) into
// something encoding/json accepts.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

func unmarshalJSON(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
