package cli

import "github.com/vigil-hpc/vigil/internal/server"

func init() {
	register(Command{Name: "server", Summary: "store samples and serve the Prometheus query API and remote write", Run: server.Run})
}
