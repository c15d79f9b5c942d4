package kernfs

// LineCache remembers what each line of a kernel file resolved to on the
// previous read, by position and name. The lines of files such as
// /proc/vmstat rarely move, so a tick compares a name in place instead of
// looking it up in a map; a moved or new line is a miss, resolved by the
// caller and Put back.
type LineCache[T any] struct {
	lines []cachedLine[T]
}

type cachedLine[T any] struct {
	name string
	v    T
	ok   bool
}

// Get returns what line i resolved to, if it has the same name as then.
func (c *LineCache[T]) Get(i int, name []byte) (T, bool) {
	if i < len(c.lines) && c.lines[i].ok && c.lines[i].name == string(name) {
		return c.lines[i].v, true
	}
	var zero T
	return zero, false
}

// Put records what line i, named name, resolved to.
func (c *LineCache[T]) Put(i int, name []byte, v T) {
	for len(c.lines) <= i {
		c.lines = append(c.lines, cachedLine[T]{})
	}
	c.lines[i] = cachedLine[T]{name: string(name), v: v, ok: true}
}
