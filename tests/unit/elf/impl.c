/* The functions the ELF tests hook: defined here, called from target*.c. */
int target_fn(int x);
int target_fn2(int x);

int target_fn(int x)
{
    return 2 * x;
}

int target_fn2(int x)
{
    return 3 * x;
}
