/* Opens a library RTLD_LOCAL and runs one of its functions: the layout of a
 * program that embeds Python through dlopen, where the capsule API is not in
 * the global scope and only the modules linked against it can reach it.
 * Usage: local_scope LIBRARY FUNCTION (called as a main with no arguments) */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: local_scope LIBRARY FUNCTION\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    int (*run)(int, char **) = lib ? (int (*)(int, char **))dlsym(lib, argv[2]) : NULL;
    if (!run) {
        fprintf(stderr, "local_scope: %s\n", dlerror());
        return 2;
    }
    char *args[] = {argv[2], NULL};
    return run(1, args);
}
