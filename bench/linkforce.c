// SPDX-License-Identifier: LGPL-2.1-or-later
/* Link change -> rules in force, as the kernel sees it: a link becomes one of a denied kind, and a child as the app's
 * uid sends UDP datagrams to an address routed through it until sendto() fails with EPERM (the rules reject it).
 * Prints the time from the change's first request to the first rejected datagram, in µs.
 *
 *   linkforce UID ADDR PORT CHANGE... -- daemon            nothing more: the daemon sees the change
 *   linkforce UID ADDR PORT CHANGE... -- run CMD [ARG...]  CMD started once the change's first request is
 *                                                           answered, and waited for (the baseline: nft -f SCRIPT)
 *
 * CHANGE, all of it rtnetlink requests sent from here (no process start in the daemon's figure):
 *   create LINK PEER PEERNS CIDR  a link appears: RTM_NEWLINK creating the veth pair LINK / PEER (PEER in the
 *                                 namespace PEERNS), PEER set up, then LINK's address CIDR (a /24, so its prefix
 *                                 route comes with it), then LINK set up. Before, ADDR must be unreachable (the
 *                                 bench routes its prefix to `unreachable` at a higher metric than LINK's route).
 *   rename OLD NEW                the link OLD, up and routing ADDR, is renamed NEW (one RTM_NEWLINK): its kind
 *                                 changes with its name. Before, ADDR must be reachable through it.
 * The child counts the datagrams that left through the link between the change and the first rejection: traffic
 * the rules did not yet cover. Bounded: 10 s. */
#include "common.h"
#include <grp.h>
#include <linux/veth.h>
#include <sched.h>
#include <sys/wait.h>

static void put_attr(char **p, unsigned short type, const void *data, size_t len) {
    struct rtattr *a = (struct rtattr *)*p;
    a->rta_type = type;
    a->rta_len = RTA_LENGTH(len);
    if (len) memcpy(RTA_DATA(a), data, len);
    *p += RTA_ALIGN(a->rta_len);
}

/* Opens a nested attribute; close_nest() sets its length once its contents are written. */
static struct rtattr *open_nest(char **p, unsigned short type) {
    struct rtattr *a = (struct rtattr *)*p;
    a->rta_type = type;
    *p += RTA_LENGTH(0);
    return a;
}

static void close_nest(char *p, struct rtattr *a) { a->rta_len = (unsigned short)(p - (char *)a); }

/* RTM_NEWLINK: a veth pair, both ends down, `name` (NOARP) here and `peer` in the namespace of `nsfd`, both with the
 * ifindex `index` (so that no request is needed to learn it; veth takes the peer's only if the link's is given
 * too). The peer cannot be created up: veth refuses to open an end whose pair is not complete yet (ENOTCONN). */
static void create_veth(int fd, const char *name, const char *peer, int nsfd, int index) {
    static char buf[1024];
    memset(buf, 0, sizeof buf);
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    nh->nlmsg_type = RTM_NEWLINK;
    nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    struct ifinfomsg *ifi = NLMSG_DATA(nh);
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = index;
    /* No ARP, as a cellular link (raw IP): a datagram leaves at once instead of waiting in the neighbour queue,
     * whose retries (1 s) would hold the send buffer and keep the probe's datagrams from reaching the rules. */
    ifi->ifi_flags = IFF_NOARP;
    ifi->ifi_change = IFF_NOARP;
    char *p = (char *)ifi + NLMSG_ALIGN(sizeof *ifi);
    put_attr(&p, IFLA_IFNAME, name, strlen(name) + 1);
    struct rtattr *info = open_nest(&p, IFLA_LINKINFO);
    put_attr(&p, IFLA_INFO_KIND, "veth", 5);
    struct rtattr *data = open_nest(&p, IFLA_INFO_DATA);
    struct rtattr *vp = open_nest(&p, VETH_INFO_PEER);
    struct ifinfomsg *pifi = (struct ifinfomsg *)p;
    pifi->ifi_family = AF_UNSPEC;
    pifi->ifi_index = index;
    p += NLMSG_ALIGN(sizeof *pifi);
    put_attr(&p, IFLA_IFNAME, peer, strlen(peer) + 1);
    put_attr(&p, IFLA_NET_NS_FD, &nsfd, sizeof nsfd);
    close_nest(p, vp);
    close_nest(p, data);
    close_nest(p, info);
    nh->nlmsg_len = (unsigned)(p - buf);
    if (send(fd, buf, nh->nlmsg_len, 0) < 0) die("netlink send RTM_NEWLINK (create)");
    nl_ack_or_die(fd, "RTM_NEWLINK (create)");
}

/* RTM_NEWLINK renaming the link `index`, with ack. */
static void rename_link(int fd, int index, const char *name) {
    static char buf[256];
    memset(buf, 0, sizeof buf);
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    nh->nlmsg_type = RTM_NEWLINK;
    nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    struct ifinfomsg *ifi = NLMSG_DATA(nh);
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = index;
    char *p = (char *)ifi + NLMSG_ALIGN(sizeof *ifi);
    put_attr(&p, IFLA_IFNAME, name, strlen(name) + 1);
    nh->nlmsg_len = (unsigned)(p - buf);
    if (send(fd, buf, nh->nlmsg_len, 0) < 0) die("netlink send RTM_NEWLINK (rename)");
    nl_ack_or_die(fd, "RTM_NEWLINK (rename)");
}

int main(int argc, char **argv) {
    const char *usage = "usage: linkforce UID ADDR PORT create LINK PEER PEERNS CIDR | rename OLD NEW -- daemon | run CMD...\n";
    if (argc < 8) die(usage);
    uid_t uid = (uid_t)atoi(argv[1]);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) die("bad address %s\n", argv[2]);
    int create = !strcmp(argv[4], "create");
    int nchange = create ? 4 : 2;
    if (!create && strcmp(argv[4], "rename")) die(usage);
    int m = 5 + nchange; /* "--" */
    if (argc < m + 2 || strcmp(argv[m], "--")) die(usage);
    int baseline = !strcmp(argv[m + 1], "run");
    if (!baseline && strcmp(argv[m + 1], "daemon")) die("unknown mode %s\n", argv[m + 1]);
    if (baseline && argc < m + 3) die("run needs a command\n");
    char **cmdv = argv + m + 2;

    /* create: both ends' ifindex, far above what the bench's namespaces hold. rename: the link's. */
    int index = 4096, nsfd = -1;
    const char *link = argv[5], *peer = NULL;
    char nspath[256] = "";
    struct in_addr local = {0};
    unsigned char plen = 0;
    if (create) {
        peer = argv[6];
        snprintf(nspath, sizeof nspath, "/run/netns/%s", argv[7]);
        nsfd = open(nspath, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0) die("open %s", nspath);
        char cidr[64];
        snprintf(cidr, sizeof cidr, "%s", argv[8]);
        char *slash = strchr(cidr, '/');
        if (!slash) die("CIDR %s has no prefix length\n", argv[8]);
        *slash = 0;
        if (inet_pton(AF_INET, cidr, &local) != 1) die("bad address %s\n", cidr);
        plen = (unsigned char)atoi(slash + 1);
        if (if_nametoindex(link)) die("%s exists before the change\n", link);
    } else {
        index = (int)ifindex_or_die(link);
        if (if_nametoindex(argv[6])) die("%s exists before the change\n", argv[6]);
    }
    errno = 0;

    int go[2], back[2];
    if (pipe(go) < 0 || pipe(back) < 0) die("pipe");
    pid_t child = fork();
    if (child == 0) {
        close(go[1]);
        close(back[0]);
        if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0) die("setuid");
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        char byte = 0;
        int sent = sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a) >= 0;
        if (create && (sent || (errno != EHOSTUNREACH && errno != ENETUNREACH)))
            die("sendto before the change should find no route");
        if (!create && !sent) die("sendto before the change should pass");
        errno = 0;
        if (write(back[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1) die("pipe\n");
        /* [0] the rejection, [1] the first datagram that left (0: none), [2] how many left, [3] how many found the
         * send buffer full (EAGAIN: not sent, so they tell nothing) */
        double r[4] = {0, 0, 0, 0};
        double end = now_us() + 10e6, t;
        for (;;) {
            t = now_us();
            /* Never blocking: a datagram waiting for send-buffer space would be timed late. */
            if (sendto(s, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof a) < 0) {
                if (errno == EPERM) break;
                if (errno == EAGAIN || errno == ENOBUFS) r[3]++;
                else if (errno != EHOSTUNREACH && errno != ENETUNREACH) die("sendto");
                errno = 0;
            } else {
                if (r[2] == 0) r[1] = t;
                r[2]++;
            }
            if (t > end) die("not rejected within 10 s (%.0f datagrams left through the link)\n", r[2]);
            sched_yield();
        }
        r[0] = t;
        if (write(back[1], r, sizeof r) != sizeof r) die("pipe\n");
        _exit(0);
    }
    /* Only the child writes back: should it die, the reads below see the end of the pipe, not a wait forever. */
    close(go[0]);
    close(back[1]);
    int fd = rtnl_open(0, 0), pfd = -1;
    if (create) {
        /* A socket in the peer's namespace, made before the change: sockets keep the namespace they were made in. */
        int here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (here < 0 || setns(nsfd, CLONE_NEWNET) < 0) die("enter %s", nspath);
        pfd = rtnl_open(0, 0);
        if (setns(here, CLONE_NEWNET) < 0) die("back to the bench namespace");
        close(here);
    }
    char byte = 0;
    if (read(back[0], &byte, 1) != 1) die("the probe failed before the change\n");
    double t0 = now_us();
    if (write(go[1], &byte, 1) != 1) die("pipe\n");
    if (create) create_veth(fd, link, peer, nsfd, index);
    else rename_link(fd, index, argv[6]);
    double created = now_us();
    pid_t cmd = 0;
    if (baseline) {
        cmd = fork();
        if (cmd == 0) { execvp(cmdv[0], cmdv); _exit(127); }
    }
    if (create) {
        /* The peer up, so that LINK has carrier once up (the datagrams need no one to receive them). */
        rtnl_set_up(pfd, index, 1, 1);
        rtnl_add_addr4_prefix(fd, index, ntohl(local.s_addr), plen);
        rtnl_set_up(fd, index, 1, 1);
    }
    double configured = now_us();
    double cmd_done = 0;
    if (baseline) {
        int st;
        if (waitpid(cmd, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) die("%s failed\n", cmdv[0]);
        cmd_done = now_us();
    }
    double r[4];
    if (read(back[0], r, sizeof r) != sizeof r) die("the probe saw no rejection\n");
    waitpid(child, NULL, 0);
    printf("{\"in_force_us\":%.1f,\"created_us\":%.1f,\"configured_us\":%.1f,\"first_passed_us\":%.1f,"
           "\"passed\":%.0f,\"buffer_full\":%.0f,\"cmd_us\":%.1f}\n",
           r[0] - t0, created - t0, configured - t0, r[1] ? r[1] - t0 : -1, r[2], r[3], baseline ? cmd_done - t0 : -1);
    return 0;
}
