package all

import _ "github.com/vigil-hpc/vigil/internal/sampler/plugins/lustre"
