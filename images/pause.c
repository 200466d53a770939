/*
 * pause: the process that holds a pod sandbox's namespaces.
 *
 * Sleeps in pause() forever; reaps any child re-parented to it (it is PID 1 of the pod when
 * the pod shares a PID namespace); exits 0 on SIGTERM or SIGINT so that stopping a sandbox
 * is quick and clean.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_terminate(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    /* Reap every exited child; several SIGCHLD may have merged into one. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static void install(int sig, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) < 0) {
        _exit(1);
    }
}

int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        /* Like the upstream pause: no arguments are accepted. */
        return 1;
    }
    install(SIGTERM, on_terminate);
    install(SIGINT, on_terminate);
    install(SIGCHLD, on_child);
    for (;;) {
        pause();
    }
    return 42; /* not reached */
}
