package shell

import "testing"

func TestShellParseIncomplete(t *testing.T) {
	for _, src := range []string{"if true; then", "echo 'open", "while true; do", "echo $(", "for i in 1", "cat <<EOF\nno end"} {
		if _, err := parseScript(src); err != errIncomplete {
			t.Errorf("parseScript(%q) = %v, want errIncomplete", src, err)
		}
	}
	for _, src := range []string{"fi", "echo ;;", "then echo"} {
		if _, err := parseScript(src); err == nil || err == errIncomplete {
			t.Errorf("parseScript(%q) = %v, want a syntax error", src, err)
		}
	}
}
