// SPDX-License-Identifier: LGPL-2.1-or-later
/* An installed app's program started where dbus-daemon starts D-Bus-activated apps (a real user manager's
 * session.slice/dbus.service), as that user, ROUNDS times, GAP_MS apart; the app (execapp) sends a datagram over the
 * denied link every INTERVAL_US from its exec on and says when it was in its scope and when a send was first
 * refused, counted from the moment just before the child's execve.
 *
 *   execfound CGROUP_DIR UID PROGRAM PEER PORT INTERVAL_US ROUNDS GAP_MS TIMEOUT_MS
 * Prints one JSON object: {"rounds":N,"starts":[each start's JSON line from execapp, or null if it said nothing]}. */
#include "common.h"
#include <grp.h>

/* The child: into the cgroup and the uid, then the time, then the exec with that time as its first argument. */
static void start_child(const char *procs, uid_t uid, int out, char **argv) {
    int c = open(procs, O_WRONLY | O_CLOEXEC);
    if (c < 0 || write(c, "0", 1) != 1) _exit(3);
    close(c);
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(4);
    if (dup2(out, 1) != 1) _exit(5);
    char t0[32];
    snprintf(t0, sizeof t0, "%.1f", now_us());
    argv[1] = t0;
    execv(argv[0], argv);
    _exit(6);
}

/* Everything the child writes until it closes its end, or until `deadline_us`. */
static size_t read_all(int fd, char *buf, size_t cap, double deadline_us) {
    size_t len = 0;
    while (len + 1 < cap) {
        double left = deadline_us - now_us();
        if (left <= 0) break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)(left / 1e3) + 1) <= 0) continue;
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    buf[len] = 0;
    return len;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: execfound CGROUP_DIR UID PROGRAM PEER PORT INTERVAL_US ROUNDS GAP_MS TIMEOUT_MS\n");
        return 2;
    }
    char procs[4096];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", argv[1]);
    uid_t uid = (uid_t)atoi(argv[2]);
    int rounds = atoi(argv[7]);
    double gap_ms = atof(argv[8]);
    char *child_argv[] = {argv[3], NULL, argv[4], argv[5], argv[6], argv[9], NULL};
    printf("{\"rounds\":%d,\"starts\":[", rounds);
    for (int i = 0; i < rounds; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) die("pipe");
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) start_child(procs, uid, p[1], child_argv);
        close(p[1]);
        static char line[4096];
        size_t n = read_all(p[0], line, sizeof line, now_us() + atof(argv[9]) * 1e3 + 3e6);
        close(p[0]);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) >= 3 && WEXITSTATUS(status) <= 6)
            die("round %d: the child could not start the app (%d)", i, WEXITSTATUS(status));
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' ')) line[--n] = 0;
        printf("%s%s", i ? "," : "", n && line[0] == '{' ? line : "null");
        fflush(stdout);
        usleep((useconds_t)(gap_ms * 1e3));
    }
    printf("]}\n");
    return 0;
}
