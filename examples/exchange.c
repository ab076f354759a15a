/*
 * exchange.c — a small producer/consumer program that shares a tensor
 * through DLPack, annotated with include/dlshim.h.  `make demo` runs it under
 * dlshim twice: once as written, once with --double-release, the classic
 * bug where a consumer calls the producer's deleter twice.
 *
 * Build: cc -Iinclude examples/exchange.c   (no link flag: without the shim
 * the annotations do nothing).
 */
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the producer ("camera") owns frames and hands them out -------------- */
typedef struct {
    int64_t shape[3];
    unsigned char *pixels;
} frame;

static void camera_free(DLManagedTensor *t)
{
    frame *f = t->manager_ctx;
    free(f->pixels);
    free(f);
    free(t);
}

static DLManagedTensor *camera_capture(int64_t h, int64_t w)
{
    frame *f = malloc(sizeof(*f));
    DLManagedTensor *t = calloc(1, sizeof(*t));
    if (!f || !t)
        exit(1);
    f->shape[0] = h, f->shape[1] = w, f->shape[2] = 3;
    f->pixels = malloc((size_t)(h * w * 3));
    if (!f->pixels)
        exit(1);
    for (int64_t i = 0; i < h * w * 3; i++)
        f->pixels[i] = (unsigned char)(i % 251);
    t->dl_tensor.data = f->pixels;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 3;
    t->dl_tensor.dtype.code = kDLUInt;
    t->dl_tensor.dtype.bits = 8;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = f->shape;
    t->manager_ctx = f;
    t->deleter = camera_free;
    dlshim_export(t, "camera");
    return t;
}

/* ---- the consumer ("model") takes ownership and releases when done ------- */
static double model_mean(DLManagedTensor *t)
{
    dlshim_import(t, "model");
    const DLTensor *d = &t->dl_tensor;
    int64_t n = d->shape[0] * d->shape[1] * d->shape[2];
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += ((const unsigned char *)d->data)[i];
    return sum / (double)n;
}

int main(int argc, char **argv)
{
    int bug = argc > 1 && strcmp(argv[1], "--double-release") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with dlshim's */
    DLManagedTensor *frame1 = camera_capture(480, 640);
    printf("mean pixel: %.3f\n", model_mean(frame1));
    void (*release)(DLManagedTensor *) = frame1->deleter;
    release(frame1);
    if (bug)
        release(frame1); /* the bug: a second release, a double free */
    DLManagedTensor *frame2 = camera_capture(240, 320);
    printf("mean pixel: %.3f\n", model_mean(frame2));
    frame2->deleter(frame2);
    puts("done");
    return 0;
}
