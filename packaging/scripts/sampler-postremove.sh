#!/bin/sh
# Package vigil-sampler. It keeps no data; dpkg removes the config on
# purge. The vigil user and group stay, as Debian does for system users:
# files it owns may remain elsewhere, and package vigil may still use it.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
exit 0
