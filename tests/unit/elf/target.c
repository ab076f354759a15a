/* Calls target_fn and target_fn3 through its GOT (a JUMP_SLOT, or with
 * -fno-plt a GLOB_DAT), and takes target_fn2's address (always a
 * GLOB_DAT).  Built in several link variants (lazy, partial and full RELRO,
 * -fno-plt) by the Makefile for test_elf.c. */
int target_fn(int x);
int target_fn2(int x);
int target_fn3(int x);
int call_target(int x);
int call_target3(int x);
int (*target_address(void))(int);

int call_target(int x)
{
    return target_fn(x);
}

int call_target3(int x)
{
    return target_fn3(x);
}

int (*target_address(void))(int)
{
    return target_fn2;
}
