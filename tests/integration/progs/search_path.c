/*
 * Which library a bare dlopen finds, for test_search_path.py, in three
 * roles chosen at build time:
 *   -DPICK=N     libpick.so: pick() returns N (two builds in two folders)
 *   -DOPENER     libopener_*.so: open_and_pick() dlopens "libpick.so" by its
 *                bare name, so glibc searches the opener's own RPATH or
 *                RUNPATH (each build has one, $ORIGIN/first)
 *   (neither)    the program: `search_path OPENER` loads the opener by its
 *                path and prints "picked N" (-1: no libpick.so found)
 */
#include <dlfcn.h>
#include <stdio.h>

#if defined(PICK)
int pick(void);
int pick(void)
{
    return PICK;
}
#elif defined(OPENER)
int open_and_pick(void);
int open_and_pick(void)
{
    void *h = dlopen("libpick.so", RTLD_NOW);
    int (*f)(void) = h ? (int (*)(void))dlsym(h, "pick") : NULL;
    return f ? f() : -1;
}
#else
int main(int argc, char **argv)
{
    void *opener = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
    int (*open_and_pick)(void) = opener ? (int (*)(void))dlsym(opener, "open_and_pick") : NULL;
    if (!open_and_pick) {
        printf("no opener: %s\n", dlerror());
        return 1;
    }
    printf("picked %d\n", open_and_pick());
    return 0;
}
#endif
