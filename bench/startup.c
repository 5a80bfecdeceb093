// SPDX-License-Identifier: LGPL-2.1-or-later
/* Start-up: binds a NOTIFY_SOCKET datagram socket, forks, enters the namespace the way `ip netns exec` does
 * (setns, private mount namespace, sysfs remounted), takes t0 and execs the server; then times until READY=1
 * arrives and until the first request (sent as soon as the socket accepts) is answered. RUNS times; the server is
 * stopped with SIGTERM (SIGKILL after 5 s) after each run. NETNS "-" stays in the current namespace.
 *
 *   startup NETNS RUNS SOCKET 'REQUEST' -- ARGV...
 * Prints one JSON object: exec to READY=1 and exec to the first answer, in microseconds. */
#include "common.h"
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static int reap(pid_t pid, double timeout_us) {
    double end = now_us() + timeout_us;
    int status;
    while (now_us() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        usleep(1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[5], "--") != 0) {
        fprintf(stderr, "usage: startup NETNS RUNS SOCKET REQUEST -- ARGV...\n");
        return 2;
    }
    const char *ns = argv[1], *sock = argv[3];
    int runs = atoi(argv[2]);
    char req[512];
    snprintf(req, sizeof req, "%s\n", argv[4]);
    char **cmd = argv + 6;
    char notify_path[108];
    snprintf(notify_path, sizeof notify_path, "%s.notify", sock);

    samples_t ready = {0}, answer = {0};
    int failures = 0;
    for (int run = 0; run < runs; run++) {
        unlink(notify_path);
        int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", notify_path);
        if (bind(nfd, (struct sockaddr *)&a, sizeof a) != 0) die("bind %s", notify_path);
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) != 0) die("pipe");

        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (strcmp(ns, "-") != 0) {
                char path[256];
                snprintf(path, sizeof path, "/run/netns/%s", ns);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) die("setns %s", path);
                if (unshare(CLONE_NEWNS) != 0) die("unshare");
                if (mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0) die("mount --make-rslave /");
                umount2("/sys", MNT_DETACH);
                if (mount(ns, "/sys", "sysfs", 0, NULL) != 0) die("mount sysfs");
            }
            setenv("NOTIFY_SOCKET", notify_path, 1);
            double t0 = now_us();
            if (write(pfd[1], &t0, sizeof t0) != sizeof t0) _exit(127);
            execv(cmd[0], cmd);
            _exit(127);
        }
        close(pfd[1]);
        double t0;
        if (read(pfd[0], &t0, sizeof t0) != sizeof t0) die("child did not start");
        close(pfd[0]);

        double t_ready = 0, t_answer = 0, deadline = now_us() + 5e6;
        int cfd = -1;
        size_t got = 0;
        char buf[8192];
        while ((!t_ready || !t_answer) && now_us() < deadline) {
            if (cfd < 0 && !t_answer) {
                cfd = unix_connect(sock);
                if (cfd >= 0) write_all(cfd, req, strlen(req));
            }
            struct pollfd p[2] = {{nfd, POLLIN, 0}, {cfd, POLLIN, 0}};
            int nfds = cfd >= 0 ? 2 : 1;
            int connecting = cfd < 0 && !t_answer;
            if (poll(p, nfds, connecting ? 0 : 100) < 0 && errno != EINTR) die("poll");
            if (connecting && !(p[0].revents & POLLIN)) {
                /* not listening yet: retry shortly without hogging a core the daemon needs */
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
                if (waitpid(pid, NULL, WNOHANG) == pid) die("the server exited during start-up");
            }
            if (p[0].revents & POLLIN) {
                double t = now_us();
                ssize_t n = recv(nfd, buf, sizeof buf - 1, 0);
                if (n > 0) {
                    buf[n] = 0;
                    if (!t_ready && (strncmp(buf, "READY=1", 7) == 0 || strstr(buf, "\nREADY=1"))) t_ready = t;
                }
            }
            if (cfd >= 0 && nfds == 2 && (p[1].revents & (POLLIN | POLLHUP))) {
                double t = now_us();
                ssize_t n = read(cfd, buf + got, sizeof buf - got - 1);
                if (n <= 0) {
                    close(cfd);
                    cfd = -1;
                    got = 0;
                    continue;
                }
                got += n;
                if (memchr(buf, '\n', got)) {
                    if (strncmp(buf, "{\"ok\":true", 10) != 0) {
                        buf[got] = 0;
                        fprintf(stderr, "startup: unexpected first answer: %s", buf);
                        failures++;
                    }
                    t_answer = t;
                    close(cfd);
                    cfd = -1;
                }
            }
        }
        if (cfd >= 0) close(cfd);
        if (t_ready && t_answer) {
            samples_add(&ready, t_ready - t0);
            samples_add(&answer, t_answer - t0);
        } else {
            fprintf(stderr, "startup: run %d: READY=1 %s, answer %s within 5 s\n", run, t_ready ? "seen" : "MISSING",
                    t_answer ? "seen" : "MISSING");
            failures++;
        }
        kill(pid, SIGTERM);
        if (reap(pid, 5e6) < 0) {
            fprintf(stderr, "startup: run %d: the server ignored SIGTERM for 5 s; killed\n", run);
            failures++;
        }
        close(nfd);
        unlink(notify_path);
        unlink(sock);
    }
    printf("{\"runs\":%d,\"failures\":%d,", runs, failures);
    samples_json(stdout, "ready_us", &ready);
    printf(",");
    samples_json(stdout, "answer_us", &answer);
    printf("}\n");
    return failures ? 1 : 0;
}
