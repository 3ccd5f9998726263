package store

import "syscall"

// syscallENOTDIR is what opening "a/b" returns when "a" is an object: for
// the store that means "no object b under a".
const syscallENOTDIR = syscall.ENOTDIR
