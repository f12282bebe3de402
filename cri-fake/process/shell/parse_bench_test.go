package shell

import (
	"runtime"
	"strings"
	"testing"
)

// scriptShapes are scripts of many small commands, the shapes whose tree costs most per byte.
var scriptShapes = []struct{ name, line string }{
	{"colon", ":\n"},
	{"assign", "x=1\n"},
	{"echo", "echo hello world\n"},
	{"pipeline", "a|b|c\n"},
	{"andor", "a&&b||c\n"},
	{"if", "if a;then b;fi\n"},
}

// BenchmarkParseRetained is the heap a parsed script's tree keeps, per byte of script
// (heapB/srcB), for 1 MiB of each shape: what holding a whole script's tree costs.
func BenchmarkParseRetained(b *testing.B) {
	for _, shape := range scriptShapes {
		src := strings.Repeat(shape.line, (1<<20)/len(shape.line))
		b.Run(shape.name, func(b *testing.B) {
			var before, after runtime.MemStats
			var ratio float64
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				l, err := parseScript(src)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(l)
				ratio = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(src))
			}
			b.ReportMetric(ratio, "heapB/srcB")
		})
	}
}
