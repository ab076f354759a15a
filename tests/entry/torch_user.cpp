// A C++ program using libtorch's DLPack API, traced by dlshim with no
// configuration: at::toDLPack exports, at::fromDLPack imports, the tensor's
// death releases.  `torch_user [roundtrip|drop]`.
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>

#include <cstdio>
#include <cstring>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "roundtrip";
    at::Tensor t = at::ones({2, 3});
    DLManagedTensor *m = at::toDLPack(t);
    if (!std::strcmp(mode, "drop")) {
        m->deleter(m); // exported, never imported
        std::printf("dropped\n");
        return 0;
    }
    {
        at::Tensor u = at::fromDLPack(m);
        std::printf("sum %g\n", u.sum().item<float>());
    } // u dies: the DLPack deleter runs
    std::printf("done\n");
    return 0;
}
