package sandbox

// sysSetns is setns(2)'s number, which package syscall does not define.
const sysSetns = 308
