/* fork while another thread loads and unloads a library: a thread loops
 * dlopen/dlclose of a real library (libcrypto) while the main thread forks
 * N children; each child makes one (test-double) DLPack capsule, consumes and
 * releases it, and exits.  A shim lock that another thread holds at fork()
 * (the module table, which the dlopen hook updates) would stay held in the
 * child, and its first capsule call would wait forever: each child gets a
 * deadline, and one that misses it is killed and reported, with its stack
 * first (gdb, where installed): where it waits is the whole diagnosis.
 * Usage: fork_dlopen N [library]; prints "forks=N hung=H failed=F" (F: a
 * child that exited non-zero, or a fork that failed); exits 1 if H or F > 0. */
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asan_fork_gate.h"
#include "fakepy.h"

static atomic_bool stop;
static const char *library = "libcrypto.so.3";

/* Under ASan (asan_fork_gate.h) the loading thread loads and unloads inside
 * the fork gate: dlopen and dlclose allocate (seen once in ~4,000 forks,
 * with gdb: the shim's lookup of Py_IsInitialized dlopens, glibc's
 * _dl_find_object_update mallocs, ASan's SizeClassAllocator64 lock); the
 * plain and valgrind runs keep the loading racing the fork. */

static void *load_unload(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        FORK_GATE_ENTER();
        void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (h)
            dlclose(h);
        FORK_GATE_LEAVE();
    }
    return NULL;
}

static int64_t shape[1] = {4};
static float data[4];
static int released;

static void delete_tensor(DLManagedTensor *t)
{
    (void)t;
    released++;
}

static int child(void)
{
    DLManagedTensor t = {.dl_tensor = {.data = data, .device = {kDLCPU, 0}, .ndim = 1,
                                       .dtype = {kDLFloat, 32, 1}, .shape = shape},
                         .deleter = delete_tensor};
    PyObject *capsule = PyCapsule_New(&t, "dltensor", NULL);
    DLManagedTensor *taken = PyCapsule_GetPointer(capsule, "dltensor");
    PyCapsule_SetName(capsule, "used_dltensor");
    taken->deleter(taken);
    fake_capsule_free(capsule);
    return released == 1 ? 0 : 2;
}

/* The stack of every thread of `pid`, on stdout (which the test shows
 * whole), through gdb: attaching stops the child where it waits. */
static void show_stacks(pid_t pid)
{
    char command[160];
    snprintf(command, sizeof(command),
             "env -u LD_PRELOAD timeout 120 gdb -p %d -batch -nx -ex 'thread apply all bt' "
             "</dev/null 2>&1",
             (int)pid);
    printf("child %d hung; its stacks:\n", (int)pid);
    fflush(stdout);
    if (system(command) != 0)
        printf("(no stacks: gdb failed or is not installed)\n");
    fflush(stdout);
}

/* Waits up to 20 s for `pid`; a child still running then is hung. */
static int wait_child(pid_t pid)
{
    struct timespec start, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 20) {
            show_stacks(pid);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2)
        library = argv[2];
    pthread_t thread;
    pthread_create(&thread, NULL, load_unload, NULL);
    int hung = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        FORK_GATE_ENTER();
        pid_t pid = fork();
        if (pid != 0)
            FORK_GATE_LEAVE(); /* the child never loads: its copy of the gate stays taken */
        if (pid == 0)
            exit(child());
        if (pid < 0) { /* no child to wait for: waitpid(-1) would reap any */
            printf("fork %d failed: %s\n", i, strerror(errno));
            failed++;
            continue;
        }
        int r = wait_child(pid);
        hung += r == -1;
        failed += r > 0;
    }
    atomic_store(&stop, true);
    pthread_join(thread, NULL);
    printf("forks=%d hung=%d failed=%d\n", n, hung, failed);
    return hung || failed;
}
