package filesystem

// NewWithStatfs returns the plugin with a fake statfs.
func NewWithStatfs(cfg Config, fn StatfsFunc) *Filesystem {
	f := New(cfg)
	f.statfs = fn
	return f
}

// Workers is the number of mounts holding a statfs worker (listed mounts
// plus ones that left the table while their call hung).
func (f *Filesystem) Workers() int { return len(f.byKey) }
