/* Loads the shim with dlopen (LD_PRELOAD is ignored in secure-execution
 * processes) and makes one exchange: run setuid, the shim must stay silent.
 *   secure_probe LIBDLSHIM [_exit]
 * _exit leaves without exit handlers: a sanitizer's leak check cannot run in
 * a set-id process (it may not ptrace itself) and would fail the run. */
#include <dlfcn.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

static void delete_tensor(DLManagedTensor *t)
{
    free(t);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("secure=%lu\n", getauxval(AT_SECURE));
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) : NULL;
    printf("loaded=%d\n", h != NULL);
    static int64_t shape[1] = {4};
    static float data[4];
    DLManagedTensor *t = calloc(1, sizeof(*t));
    if (!t)
        return 1;
    t->dl_tensor = (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = 1,
                              .dtype = {kDLFloat, 32, 1}, .shape = shape};
    t->deleter = delete_tensor;
    dlshim_export(t, "probe");
    dlshim_import(t, "probe_consumer");
    t->deleter(t);
    if (argc > 2 && !strcmp(argv[2], "_exit"))
        _exit(0);
    return 0;
}
