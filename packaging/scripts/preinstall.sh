#!/bin/sh
# Create the system user and group before the files are unpacked, so
# they can be owned by it. Idempotent: both packages run it.
set -e
if ! getent group vigil >/dev/null; then
	groupadd --system vigil
fi
if ! getent passwd vigil >/dev/null; then
	useradd --system --gid vigil --home-dir /var/lib/vigil --no-create-home \
		--shell /usr/sbin/nologin --comment "Vigil monitoring" vigil
fi
exit 0
