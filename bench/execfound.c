// SPDX-License-Identifier: LGPL-2.1-or-later
/* An installed app's program started where dbus-daemon starts D-Bus-activated apps (a user manager's
 * session.slice/dbus.service, a cgroup of the bench's own), ROUNDS times, GAP_MS apart; each time, from the moment
 * just before the child's execve to the moment the daemon's log says it gives that process a scope ("giving it
 * app-netpermd-...-PID.scope"): the exec heard, the process read and found, the engine's decision to ask the
 * user's manager for a scope. The log is the daemon's stderr file, followed with inotify from its end.
 *
 *   execfound CGROUP_DIR PROGRAM LOG_FILE ROUNDS GAP_MS TIMEOUT_MS
 * Prints one JSON object: the times in microseconds, and the rounds whose line never came within TIMEOUT_MS. */
#include "common.h"
#include <sys/inotify.h>

static char logbuf[1 << 20];
static size_t loglen;

/* Reads what was appended to the log; true once a line names `needle`. */
static int log_has(int fd, const char *needle) {
    for (;;) {
        if (loglen + 65536 > sizeof logbuf) {
            /* Keep the last partial line only. */
            char *nl = memrchr(logbuf, '\n', loglen);
            size_t keep = nl ? loglen - (size_t)(nl + 1 - logbuf) : 0;
            memmove(logbuf, logbuf + loglen - keep, keep);
            loglen = keep;
        }
        ssize_t n = read(fd, logbuf + loglen, 65536);
        if (n <= 0) break;
        loglen += (size_t)n;
    }
    logbuf[loglen] = 0;
    return strstr(logbuf, needle) != NULL;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: execfound CGROUP_DIR PROGRAM LOG_FILE ROUNDS GAP_MS TIMEOUT_MS\n");
        return 2;
    }
    const char *dir = argv[1], *program = argv[2], *logpath = argv[3];
    int rounds = atoi(argv[4]);
    double gap_ms = atof(argv[5]), timeout_ms = atof(argv[6]);
    char procs[4096];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    int logfd = open(logpath, O_RDONLY | O_CLOEXEC);
    if (logfd < 0) die("open %s", logpath);
    lseek(logfd, 0, SEEK_END);
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in < 0 || inotify_add_watch(in, logpath, IN_MODIFY) < 0) die("inotify %s", logpath);
    samples_t found = {0};
    int missed = 0;
    for (int i = 0; i < rounds; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) die("pipe");
        loglen = 0;
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            /* Into the session's dbus.service, then the time, then the exec (the pipe closes with it). */
            int c = open(procs, O_WRONLY | O_CLOEXEC);
            if (c < 0 || write(c, "0", 1) != 1) _exit(3);
            double t0 = now_us();
            if (write(p[1], &t0, sizeof t0) != sizeof t0) _exit(4);
            char *args[] = {(char *)program, NULL};
            execv(program, args);
            _exit(5);
        }
        close(p[1]);
        double t0 = 0;
        if (read(p[0], &t0, sizeof t0) != sizeof t0) die("the child did not start (round %d)", i);
        char c;
        if (read(p[0], &c, 1) != 0) die("the child did not exec");
        close(p[0]);
        char needle[64];
        snprintf(needle, sizeof needle, "-%d.scope", (int)pid);
        double deadline = t0 + timeout_ms * 1e3;
        int seen = 0;
        for (;;) {
            if (log_has(logfd, needle)) {
                samples_add(&found, now_us() - t0);
                seen = 1;
                break;
            }
            double left = deadline - now_us();
            if (left <= 0) break;
            struct pollfd pf = {.fd = in, .events = POLLIN};
            if (poll(&pf, 1, (int)(left / 1e3) + 1) > 0) {
                char ev[4096];
                while (read(in, ev, sizeof ev) > 0) {}
            }
        }
        if (!seen) missed++;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        usleep((useconds_t)(gap_ms * 1e3));
    }
    printf("{\"rounds\":%d,\"missed\":%d,", rounds, missed);
    samples_json(stdout, "found_us", &found);
    printf("}\n");
    return 0;
}
