package netlab

// sysSetns is setns(2); package syscall does not name it on 386.
const sysSetns = 346
