// Package rules holds Vigil's default rule file, vigil.rules.yml, which the
// vigil package installs under /etc/vigil/rules (docs/rules-default.md) and
// `vigil demo` evaluates.
package rules

import _ "embed"

// Default is vigil.rules.yml.
//
//go:embed vigil.rules.yml
var Default []byte

// FileName is the name the packages install Default under.
const FileName = "vigil.rules.yml"
