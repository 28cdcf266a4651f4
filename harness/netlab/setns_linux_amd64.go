package netlab

// sysSetns is setns(2); package syscall does not name it on amd64.
const sysSetns = 308
