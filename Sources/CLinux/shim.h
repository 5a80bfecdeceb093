// Kernel constants and structures from the Linux and glibc headers that Swift's Glibc module does not bring in
// (or brings in only under _GNU_SOURCE), so that NetpermIO can name them instead of repeating magic numbers.
#include <linux/if.h>
#include <malloc.h>
#include <linux/if_arp.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>

static const unsigned int NP_IFF_UP = IFF_UP;
static const unsigned int NP_IFF_LOWER_UP = IFF_LOWER_UP;

static const unsigned int NP_EPOLLIN = EPOLLIN;
static const unsigned int NP_EPOLLOUT = EPOLLOUT;
static const unsigned int NP_EPOLLERR = EPOLLERR;
static const unsigned int NP_EPOLLHUP = EPOLLHUP;

// What changes a configuration directory: an entry created, written, renamed, deleted, or the directory itself.
static const unsigned int NP_IN_DIRECTORY_CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM
    | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF;

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
