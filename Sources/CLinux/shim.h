// SPDX-License-Identifier: LGPL-2.1-or-later
// Kernel constants and structures from the Linux and glibc headers that Swift's Glibc module does not bring in
// (or brings in only under _GNU_SOURCE), so that NetpermIO can name them instead of repeating magic numbers.
#include <errno.h>
#include <fcntl.h>
#include <libintl.h>
#include <locale.h>
#include <linux/if.h>
#include <linux/fs.h>
#include <malloc.h>
#include <linux/if_arp.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <arpa/inet.h>
#include <linux/connector.h>
#include <linux/cn_proc.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/signalfd.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const unsigned int NP_IFF_UP = IFF_UP;
static const unsigned int NP_IFF_LOWER_UP = IFF_LOWER_UP;

// An attribute's type without its nested and byte-order flags (a macro of an expression Swift cannot import).
static const unsigned short NP_NLA_TYPE_MASK = NLA_TYPE_MASK;

static const unsigned int NP_EPOLLIN = EPOLLIN;
static const unsigned int NP_EPOLLOUT = EPOLLOUT;
static const unsigned int NP_EPOLLERR = EPOLLERR;
static const unsigned int NP_EPOLLHUP = EPOLLHUP;

// What changes a configuration directory: an entry created, written, renamed, deleted, or the directory itself.
static const unsigned int NP_IN_DIRECTORY_CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM
    | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF;
static const unsigned int NP_IN_ENTRY_MADE = IN_CREATE | IN_MOVED_TO;

// Opens a file only to look at it (fstat) before anything of it is read: no device's open, no FIFO's wait.
static const int NP_O_PATH = __O_PATH; // O_PATH, which glibc names only under _GNU_SOURCE

static const int NP_EFD_NONBLOCK = EFD_NONBLOCK;
static const int NP_EFD_CLOEXEC = EFD_CLOEXEC;

static const int NP_SO_PEERCRED = SO_PEERCRED;
static const int NP_SO_PEERGROUPS = SO_PEERGROUPS;
// Linux 6.5; Debian 12's headers predate it.
#ifdef SO_PEERPIDFD
static const int NP_SO_PEERPIDFD = SO_PEERPIDFD;
#else
static const int NP_SO_PEERPIDFD = 77;
#endif

static const unsigned int NP_ARPHRD_ETHER = ARPHRD_ETHER;
static const unsigned int NP_ARPHRD_PPP = ARPHRD_PPP;
static const unsigned int NP_ARPHRD_RAWIP = ARPHRD_RAWIP;
static const unsigned int NP_ARPHRD_LOOPBACK = ARPHRD_LOOPBACK;
static const unsigned int NP_ARPHRD_NONE = ARPHRD_NONE;

// accept4(2) is declared only under _GNU_SOURCE: one call instead of accept and three fcntl calls.
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);

// struct ucred is visible only under _GNU_SOURCE, which Swift's Glibc module is not built with.
struct np_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};
_Static_assert(sizeof(struct np_ucred) == 12, "struct ucred is three 32-bit fields");

static const int NP_SO_PASSCRED = SO_PASSCRED;
// Also only under _GNU_SOURCE; the values are the kernel's ABI.
#define NP_SCM_CREDENTIALS 2
#ifndef MSG_CMSG_CLOEXEC
#define MSG_CMSG_CLOEXEC 0x40000000
#endif

// recvmsg(2) of a stream socket with SO_PASSCRED, non-blocking: the bytes, and the credentials the kernel attached
// to them (a read never spans bytes of two senders). The control buffer has room for SCM_CREDENTIALS only, so
// descriptors a client passes are never installed; any that were anyway are closed. *has_cred is 0 when the
// kernel attached none. Returns what recvmsg returns (errno set on -1). A function here because CMSG_* are macros.
static inline long np_recv_credentials(int fd, void *buf, unsigned long len, struct np_ucred *cred, int *has_cred) {
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(struct np_ucred))];
    } control;
    struct iovec iov = { buf, len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.space;
    msg.msg_controllen = sizeof control.space;
    *has_cred = 0;
    long n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == NP_SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof *cred)) {
            memcpy(cred, CMSG_DATA(c), sizeof *cred);
            *has_cred = 1;
        } else if (c->cmsg_type == SCM_RIGHTS) {
            int *fds = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) close(fds[i]);
        }
    }
    return n;
}

// pidfd_open(2) and pidfd_send_signal(2) (Linux 5.3 and 5.1): glibc 2.36 has no wrappers Swift can see, and
// syscall(2) is variadic.
static inline int np_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}
static inline int np_pidfd_send_signal(int pidfd, int sig) {
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

// renameat2(2) with RENAME_NOREPLACE (Linux 3.15): a rename that never replaces what is at the target (EEXIST
// instead). glibc declares it only under _GNU_SOURCE, which Swift's Glibc module does not set.
static inline int np_rename_noreplace(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

// userfaultfd(2) in asynchronous write-protect mode, used for one thing: a range registered with it is never
// "faulted around" (the kernel's uffd_disable_fault_around()), so a fault maps the one page it needs instead of a
// 64 KiB window of its neighbours. No page is ever write-protected and no event is read: in async mode the kernel
// resolves a write fault by itself, and UFFD_USER_MODE_ONLY never holds a fault the kernel itself takes (needed
// without CAP_SYS_PTRACE when vm.unprivileged_userfaultfd is 0). Registering a file's private mapping needs
// UFFD_FEATURE_WP_ASYNC (Linux 6.7), which Debian 12's headers predate (uapi/linux/userfaultfd.h).
#include <linux/userfaultfd.h>
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
// The descriptor, or -1 and errno (an older kernel refuses the feature with EINVAL).
static inline int np_userfaultfd_wp_async(void) {
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0) return -1;
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}
// Registers [start, start + length) for write-protect faults: 0, or -1 and errno. ioctl(2) is variadic.
static inline int np_userfaultfd_register_wp(int fd, unsigned long start, unsigned long length) {
    struct uffdio_register r = { .range = { .start = start, .len = length }, .mode = UFFDIO_REGISTER_MODE_WP };
    return ioctl(fd, UFFDIO_REGISTER, &r);
}

// SIOCOUTQ: the bytes a socket's send buffer holds (for a Unix stream socket, what the peer has not read yet, as
// the kernel accounts it); -1 on error. ioctl(2) is variadic.
static inline int np_send_queue(int fd) {
    int n = 0;
    return ioctl(fd, SIOCOUTQ, &n) < 0 ? -1 : n;
}

// A pidfd's file system: pidfs (Linux 6.9) gives each process an inode number of its own, unique while the system
// runs; before it, every pidfd shared one anonymous inode.
#define NP_PIDFS_MAGIC 0x50494446

// bpf(2) has no glibc wrapper, and syscall(2) is variadic. Steering (Mode=steer) loads one small program with it.
static inline long np_bpf(int cmd, void *attr, unsigned int size) {
    return syscall(SYS_bpf, cmd, attr, size);
}
// Linux 5.14; Debian 12's headers predate it: the network namespace's cookie, from any socket in it.
#ifdef SO_NETNS_COOKIE
static const int NP_SO_NETNS_COOKIE = SO_NETNS_COOKIE;
#else
static const int NP_SO_NETNS_COOKIE = 71;
#endif

// The kernel's NTP status: whether the wall clock is synchronized (TIME_ERROR, STA_UNSYNC are macros).
static const int NP_TIME_ERROR = TIME_ERROR;
static const int NP_STA_UNSYNC = STA_UNSYNC;

static const int NP_SFD_CLOEXEC = SFD_CLOEXEC;

// The calling thread's id (glibc 2.36's gettid(), which Debian 12's headers declare only with _GNU_SOURCE).
static inline int np_gettid(void) { return (int)syscall(SYS_gettid); }

// C's `stderr` stream, replaced once at start (before any thread) by one whose lines go to `sink`: libraries that
// print with fprintf(stderr) (libnftables does on some failures) are then logged with a priority, and no thread
// ever swaps the stream while another may crash into it. Descriptor 2 itself is never moved. fopencookie(3) is
// declared only under _GNU_SOURCE; its functions' table is glibc's ABI.
typedef struct {
    ssize_t (*read)(void *, char *, size_t);
    ssize_t (*write)(void *, const char *, size_t);
    int (*seek)(void *, long *, int);
    int (*close)(void *);
} np_cookie_io_functions;
extern FILE *fopencookie(void *cookie, const char *mode, np_cookie_io_functions funcs);
typedef void (*np_stdio_sink)(const char *bytes, size_t count);
struct np_stdio_cookie { np_stdio_sink sink; };
static inline ssize_t np_stderr_write(void *cookie, const char *bytes, size_t count) {
    ((struct np_stdio_cookie *)cookie)->sink(bytes, count);
    return (ssize_t)count;
}
static inline int np_stderr_lines_to(np_stdio_sink sink) {
    struct np_stdio_cookie *cookie = malloc(sizeof *cookie); // the stream's for the process's life
    if (!cookie) return -1;
    cookie->sink = sink;
    np_cookie_io_functions io = { NULL, np_stderr_write, NULL, NULL };
    FILE *f = fopencookie(cookie, "w", io);
    if (!f) { free(cookie); return -1; }
    setvbuf(f, NULL, _IOLBF, 0);
    stderr = f;
    return 0;
}

// The kernel's process events (the process connector): a NETLINK_CONNECTOR socket bound to CN_IDX_PROC, subscribed
// with PROC_CN_MCAST_LISTEN; each event is a cn_msg whose data is a struct proc_event.
static const int NP_NETLINK_CONNECTOR = NETLINK_CONNECTOR;
static const unsigned int NP_CN_IDX_PROC = CN_IDX_PROC;
static const unsigned int NP_CN_VAL_PROC = CN_VAL_PROC;
static const unsigned int NP_PROC_CN_MCAST_LISTEN = PROC_CN_MCAST_LISTEN;
static const unsigned int NP_PROC_EVENT_NONE = PROC_EVENT_NONE;
static const unsigned int NP_PROC_EVENT_EXEC = PROC_EVENT_EXEC;
static const int NP_CN_MSG_SIZE = sizeof(struct cn_msg);
static const int NP_CN_MSG_LEN_OFFSET = offsetof(struct cn_msg, len);
static const int NP_PROC_EVENT_DATA_OFFSET = offsetof(struct proc_event, event_data);
static const int NP_PROC_EVENT_EXEC_TGID_OFFSET = offsetof(struct proc_event, event_data.exec.process_tgid);

// A socket filter that keeps only exec events and the kernel's answer to the subscription (PROC_EVENT_NONE): a
// compile's forks and exits, two for each exec, are dropped in the kernel rather than queued, read and parsed.
// Classic BPF loads in network byte order, so `what` (host order) is compared byte-swapped. 0, or -1 and errno.
static inline int np_proc_events_filter(int fd) {
    const unsigned int what = NLMSG_HDRLEN + sizeof(struct cn_msg) + offsetof(struct proc_event, what);
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, what),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(PROC_EVENT_EXEC), 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(PROC_EVENT_NONE), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = { .len = sizeof code / sizeof code[0], .filter = code };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
}

// The device and inode of the file /proc/PID/exe names, the path made on the stack: the exec watcher's one question
// for each of a compile's thousands of execs a second, without a string on the heap. 0, or -1 and errno.
static inline int np_proc_exe_id(int pid, unsigned long long *dev, unsigned long long *ino) {
    char path[32];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

// setns(2) and CLONE_NEWNET are declared only under _GNU_SOURCE (tests open the process connector's socket in the
// initial network namespace while their daemon runs in one of its own).
extern int setns(int fd, int nstype);
static const int NP_CLONE_NEWNET = 0x40000000;
