/* The functions the ELF tests hook: defined here, called from target*.c. */
int target_fn(int x);
int target_fn2(int x);
int target_fn3(int x);

#ifndef IMPL_FACTOR
#define IMPL_FACTOR 2 /* libimpl_other.so, a second definition, multiplies by 5 */
#endif

int target_fn(int x)
{
    return IMPL_FACTOR * x;
}

int target_fn2(int x)
{
    return 3 * x;
}

int target_fn3(int x)
{
    return 4 * x;
}
