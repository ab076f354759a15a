/* vk_setup.c: the device and buffer the Vulkan test programs share. */
#ifndef VK_SETUP_H
#define VK_SETUP_H

#include <dlpack/dlpack.h>
#include <stdbool.h>
#include <vulkan/vulkan.h>

#define BYTES 65536u
#define VK_CHECK(call)                                                       \
    do {                                                                     \
        VkResult r_ = (call);                                                \
        if (r_ != VK_SUCCESS) {                                              \
            printf("%s failed: %d\n", #call, (int)r_);                       \
            exit(1);                                                         \
        }                                                                    \
    } while (0)
extern VkInstance instance;
extern VkPhysicalDevice physical;
extern VkDevice device;

void open_device(void);
/* Queues of the first family open_device asks for (1 unless set before). */
extern uint32_t device_queues;
/* The same at Vulkan version `api`, with a feature chain for the device
 * and one more device extension (or NULL); exit 77 where the device lacks
 * either. */
void open_device_with(uint32_t api, const void *features, const char *extension);
/* An exportable buffer and its memory, filled with 0, 1, 2, ... */
void make_buffer(VkBuffer *buffer, VkDeviceMemory *memory);
/* A CPU tensor of the BYTES / 4 uint32 at p (a host mapping), whose
 * deleter frees nothing. */
DLManagedTensor mapped_tensor(uint32_t *p);
/* Memory of the first type `req` accepts, for a buffer or an image that
 * the host never reads. */
VkDeviceMemory memory_for(const VkMemoryRequirements *req);
/* A buffer of BYTES (a transfer source and destination, a uniform buffer) bound to memory of
 * its own of memory_for's. */
VkBuffer device_buffer(VkDeviceMemory *memory);
/* A tensor of the BYTES / 4 uint32 at data on a device of `type` (kDLCUDA:
 * a device buffer), whose deleter frees nothing. */
DLManagedTensor device_tensor(void *data, DLDeviceType type);
/* The memory exported as an opaque file descriptor. */
int memory_fd(VkDeviceMemory memory);

/* What the queue programs (vk_queue, vk_timeline) share: the buffer of
 * make_buffer mapped at p, the first queue, a command pool, and the event
 * `gate` that holds their late write back until the host sets it. */
typedef struct {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint32_t *p;
    VkQueue queue;
    VkCommandPool pool;
    VkEvent gate;
} queue_rig;
/* After open_device. */
void rig_open(queue_rig *r);
/* A command buffer begun; its first command waits for the gate (gated). */
VkCommandBuffer rig_begin(const queue_rig *r, int gated);
/* A command buffer of that level begun (a secondary inherits nothing). */
VkCommandBuffer rig_begin_level(const queue_rig *r, VkCommandBufferLevel level);
/* The queue programs' handoff: a CPU tensor over the first `words` words
 * of the mapping exported by "vkproducer" and imported by "cpuconsumer",
 * which prints the word at index 1 as it read it ("consumer saw N"). */
void rig_handoff(const queue_rig *r, int64_t words);
/* The gate set, the queue idle, then everything destroyed, the device and
 * the instance last. */
void rig_close(queue_rig *r);
/* One submission of cb on `queue`: it waits for `wait` and signals
 * `signal` (either VK_NULL_HANDLE: none), timeline semaphores for and to
 * `value` (0: binary ones), then `fence` (or none). */
void submit_to(VkQueue queue, VkCommandBuffer cb, VkSemaphore wait, VkSemaphore signal,
               uint64_t value, VkFence fence);
/* The same on the rig's queue, of binary semaphores. */
void rig_submit(const queue_rig *r, VkCommandBuffer cb, VkSemaphore wait, VkSemaphore signal,
                VkFence fence);
/* A semaphore of `type` (binary, or timeline: open the device with the
 * feature). */
VkSemaphore semaphore_made(VkSemaphoreType type);
/* One submission of cb (or of no command buffer) on the rig's queue that
 * signals the timeline semaphore `timeline` to `value`. */
void rig_signal_value(const queue_rig *r, VkCommandBuffer cb, VkSemaphore timeline,
                      uint64_t value);
/* A fill of the whole buffer with bytes of 1 submitted, signalling
 * `signal` (a timeline semaphore to `value`; 0: a binary one); held back
 * by the gate if `gated`. */
void rig_fill_and_signal(const queue_rig *r, VkSemaphore signal, uint64_t value, int gated);
/* A CPU tensor over the mapping handed from "vkproducer" to "cpuconsumer",
 * which prints what it read (1: the old value, 16843009: the fill's); then
 * the gate set. */
void rig_hand_over(const queue_rig *r);
/* An exportable semaphore of `type` (binary, or timeline: open the device
 * with the feature), exported as an opaque file descriptor (*fd;
 * VK_KHR_external_semaphore_fd: open the device with it). */
VkSemaphore exported_semaphore(VkSemaphoreType type, int *fd);

/* A compute pipeline whose shader writes 0x01010101 to the first words of
 * the storage buffer at set 0, binding 0 (one word a workgroup: 16 for a
 * dispatch of 16 x 1 x 1), bound as `type` (a plain, a dynamic or a texel
 * storage buffer), and a pool of 8 sets of its layout that can be freed; the set
 * layout created with `flags` (its push descriptor bit: set 0 is pushed,
 * VK_KHR_push_descriptor).  With `uniform`, the layout has a binding 1
 * too, a uniform buffer the shader does not read (compute_input). */
typedef struct {
    VkDescriptorType type;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    VkDescriptorPool pool;
    VkBufferView view[8]; /* compute_write's, for a storage texel buffer */
    unsigned views;
} compute_rig;
/* After open_device. */
void compute_open(compute_rig *c, VkDescriptorType type, VkDescriptorSetLayoutCreateFlags flags,
                  bool uniform);
/* A set allocated from the pool, empty. */
VkDescriptorSet compute_set(const compute_rig *c);
/* The buffer's first 4 KiB written to the set's binding 0 (a storage
 * texel buffer: through a view of them as VK_FORMAT_R32_UINT). */
void compute_write(compute_rig *c, VkDescriptorSet set, VkBuffer buffer);
/* The buffer's first 4 KiB written to the set's binding 1 (uniform). */
void compute_input(VkDescriptorSet set, VkBuffer buffer);
/* Everything destroyed (before rig_close). */
void compute_close(compute_rig *c);

#endif
