package rules_test

import (
	"fmt"

	"github.com/plugsim/plugsim/harness/faults/rules"
)

// A set that knows its fake's methods refuses a misspelt one, and a rule keeps its counts once
// used up.
func Example() {
	set := rules.NewSet(1, rules.WithMethods("ADD", "DEL", "CHECK", "STATUS", "GC"), rules.WithCodes(rules.CNICodes))
	if _, err := set.Add(rules.Rule{Method: "ADDD", Code: "11"}); err != nil {
		fmt.Println(err)
	}
	ids, _ := set.Add(rules.Rule{Method: "ADD", Code: "11", Message: "no IP addresses available", After: 2, Times: 1})
	for i := 1; i <= 4; i++ {
		if f, hit := set.Check("ADD", nil); hit {
			fmt.Println(i, "fails:", f.Code, f.Message)
		} else {
			fmt.Println(i, "passes")
		}
	}
	r, _ := set.Rule(ids[0])
	fmt.Println(r.Matched, r.Hits, r.UsedUp())
	// Output:
	// fault rule for ADDD: "ADDD" is not a method of this fake (did you mean ADD?); the methods are ADD, CHECK, DEL, GC, STATUS
	// 1 passes
	// 2 passes
	// 3 fails: 11 no IP addresses available
	// 4 passes
	// 3 1 true
}
