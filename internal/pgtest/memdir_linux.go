package pgtest

import "syscall"

// memoryDir is a RAM-backed directory for the private cluster, or "".
// /dev/shm is a tmpfs on most Linux systems: a disposable cluster there
// clones databases several times faster than on a disk. It is used only
// when it has room for a cluster and many test databases (containers often
// give it just 64 MB).
func memoryDir() string {
	const dir, minFree = "/dev/shm", 2 << 30
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	if uint64(st.Bavail)*uint64(st.Bsize) < minFree || syscall.Access(dir, 2 /* W_OK */) != nil {
		return ""
	}
	return dir
}
