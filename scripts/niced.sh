#!/usr/bin/env bash
# niced.sh N COMMAND...: runs COMMAND at nice N, for a caller that started it
# with `setsid` (a session of its own, so its whole process group can be
# stopped as one). With the kernel's autogroup scheduling (on here:
# /proc/sys/kernel/sched_autogroup_enabled), a new session is a new autogroup,
# and groups share the CPU equally whatever their processes' nice values:
# `setsid nice -n 10 go build` took half the CPU from the foreground's Rust
# build. So the autogroup itself gets nice N too (sched(7), "The autogroup
# feature"); without autogroups the file is absent and plain nice applies.
set -euo pipefail
n=$1
shift
echo "$n" >/proc/self/autogroup 2>/dev/null || true
exec nice -n "$n" "$@"
