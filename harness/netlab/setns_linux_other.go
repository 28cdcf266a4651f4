//go:build linux && !amd64 && !386

package netlab

import "syscall"

const sysSetns = syscall.SYS_SETNS
