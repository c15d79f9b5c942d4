package pattern_test

import (
	"fmt"

	"github.com/vigil-hpc/vigil/internal/logs/pattern"
)

func Example() {
	m := pattern.New(pattern.Config{})
	for _, msg := range []string{
		"Node 12 power budget exceeded! Power=310, Limit=300",
		"Node 7 power budget exceeded! Power=402, Limit=350",
		"session opened for user alice",
	} {
		id, isNew := m.Add([]byte(msg))
		fmt.Println(id, isNew)
	}
	for _, p := range m.Patterns() {
		fmt.Printf("%d %d %s\n", p.ID, p.Count, p.Template)
	}
	// Output:
	// 1 true
	// 1 false
	// 2 true
	// 2 1 session opened for user alice
	// 1 2 Node <*> power budget exceeded! Power=<*>, Limit=<*>
}
